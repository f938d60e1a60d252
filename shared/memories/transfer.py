"""Export a user's memories as JSONL, and import such a file back as explicit saves.

An exported line is a `MemoryView` (no vectors). An imported record is validated as a
save would be; the worker writes it with `source=import`, its `occurred_at`,
`created_at`, tags, importance, key, state and provenance (`kind`, `sources`, a fact's
`episodes`) kept. Ids are the write path's deterministic ids, so importing the same file
twice adds nothing the second time; a fact's links to episodes of the same file follow
their new ids.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from pydantic import Field, ValidationError

from memoryd.jobs.forgetting import candidate_id
from memoryd.memories.reads import ReadPath, list_memories
from memoryd.memories.writes import MemoryWriter
from memoryd.platform.errors import InvalidInput, PayloadTooLarge
from memoryd.platform.settings import Settings
from memoryd.records.candidate import Candidate
from memoryd.records.commands import Command
from memoryd.records.models import (
    MemoryKind,
    MemorySource,
    MemoryType,
    Owner,
    Scope,
    Source,
    UtcDatetime,
    as_utc,
)
from memoryd.records.schemas import Content, Identifier, Metadata, SaveRequest, Scoped, Tag
from memoryd.tenancy.limits import check_save

EXPORT_PAGE = 200
# Records written per user-lock hold: a long import must not starve live writes.
IMPORT_CHUNK = 100


class ImportRecord(Scoped):
    """One memory to import: what export writes. `id`, `source`, `updated_at` and the
    version links are accepted (an export carries them) and ignored: ids are recomputed
    (so links to the source's ids would point nowhere), the source is `import`, and the
    import is the update."""

    content: Content
    type: MemoryType = MemoryType.SEMANTIC
    category: Tag | None = None
    thread_id: Identifier | None = None
    key: Identifier | None = None
    tags: list[Tag] = Field(default_factory=list)
    importance: int = Field(5, ge=1, le=10)
    enabled: bool = True
    occurred_at: UtcDatetime | None = None
    created_at: UtcDatetime | None = None
    expires_at: UtcDatetime | None = None
    metadata: Metadata | None = None
    id: str | None = None
    source: str | None = None
    updated_at: datetime | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    conflicts_with: list[str] | None = None
    kind: MemoryKind | None = None
    sources: list[MemorySource] = Field(default_factory=list)
    episodes: list[str] = Field(default_factory=list)


class ImportCommand(Command):
    records: list[ImportRecord]


def export_lines(rp: ReadPath, owner: Owner) -> Iterator[bytes]:
    """Every memory of the owner, newest first, one JSON document per line."""
    cursor: str | None = None
    while True:
        page = list_memories(rp, owner, type=None, tag=None, scope=None, project=None,
                             sort="created_at", limit=EXPORT_PAGE, cursor=cursor)
        for item in page.items:
            yield json.dumps(item.model_dump(mode="json"), ensure_ascii=False).encode() + b"\n"
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def _documents(body: bytes) -> list[tuple[int, Any]]:
    """(line number, parsed JSON) for a JSON array body or a JSONL body."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"the body is not UTF-8: {exc}", field="body") from exc
    if text.lstrip().startswith("["):
        try:
            array = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"the body is not a valid JSON array: {exc}", field="body") from exc
        except RecursionError:
            # The parser gives up on deep nesting (`"[" * 500000`) with RecursionError, not
            # JSONDecodeError; no record nests that deep (metadata is bounded far below).
            raise InvalidInput("the body nests too deeply to be a JSON array of records",
                               field="body") from None
        if not isinstance(array, list):
            raise InvalidInput("the body must be a JSON array or JSON lines", field="body")
        return [(i + 1, doc) for i, doc in enumerate(array)]
    documents = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            documents.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"line {number}: not valid JSON: {exc.msg}",
                               field=f"records[{number - 1}]") from exc
        except RecursionError:
            raise InvalidInput(f"line {number}: nests too deeply", field=f"records[{number - 1}]"
                               ) from None
    return documents


def _first_error(exc: ValidationError) -> tuple[str, str]:
    error = exc.errors()[0]
    loc = ".".join(str(p) for p in error.get("loc", ()))
    message = str(error.get("msg", "invalid")).replace("Value error, ", "")
    return loc, message


def parse_import(body: bytes, user_id: str, settings: Settings) -> list[ImportRecord]:
    """Validate every record before anything is enqueued: one bad record rejects the body,
    naming its line (JSONL) or position (array) and field."""
    documents = _documents(body)
    if not documents:
        raise InvalidInput("the body holds no record", field="body")
    if len(documents) > settings.import_max_records:
        raise PayloadTooLarge(
            f"{len(documents)} records; the limit is {settings.import_max_records} per request",
            field="body",
        )
    records = []
    for number, doc in documents:
        where = f"records[{number - 1}]"
        try:
            record = ImportRecord.model_validate(doc)
            check_save(SaveRequest(
                user_id=user_id, content=record.content, key=record.key, type=record.type,
                scope=record.scope, project=record.project, thread_id=record.thread_id,
                tags=record.tags, importance=record.importance, occurred_at=record.occurred_at,
                metadata=record.metadata,
            ), settings)
        except ValidationError as exc:
            loc, message = _first_error(exc)
            field = f"{where}.{loc}" if loc else where
            raise InvalidInput(f"line {number}: {loc or 'record'}: {message}",
                               field=field) from exc
        except (InvalidInput, PayloadTooLarge) as exc:
            raise type(exc)(f"line {number}: {exc.message}",
                            field=f"{where}.{exc.field}" if exc.field else where) from exc
        records.append(record)
    return records


def candidate_of(record: ImportRecord, received_at: datetime) -> Candidate:
    """The save an imported record becomes.

    A `created_at` later than the import's arrival is clamped to the arrival: retention
    counts from `created_at`, so a future one would keep a memory past its tenant's
    retention. Clamped rather than refused, because an export from a server whose clock
    ran ahead is still a good export, and one such record must not refuse the file.
    """
    received_at = as_utc(received_at)
    created_at = record.created_at
    if created_at is not None and created_at > received_at:
        created_at = received_at
    kind = record.kind or MemoryKind.NOTE
    # An episode keeps a turn's identity (its thread, role and words), so a fact of the
    # same file finds it under the id it gets here.
    role = next((s.role for s in record.sources if s.role is not None), None)
    return Candidate(
        content=record.content.strip(), type=record.type,
        occurred_at=record.occurred_at or created_at or received_at,
        source=Source.IMPORT, category=record.category, importance=record.importance,
        tags=list(dict.fromkeys(record.tags)), key=record.key, thread_id=record.thread_id,
        metadata=dict(record.metadata or {}), created_at=created_at,
        enabled=record.enabled, expires_at=record.expires_at,
        kind=kind, sources=list(record.sources), episodes=list(record.episodes),
        turn_role=role if kind is MemoryKind.EPISODE and record.key is None else None,
    )


def _new_ids(cmd: ImportCommand) -> dict[str, str]:
    """Exported id -> the id the import gives that record (deterministic), for the
    records that carry one."""
    return {
        record.id: candidate_id(cmd.owner, record.resolved_scope().value, record.project,
                                candidate_of(record, cmd.received_at))
        for record in cmd.records if record.id
    }


def run_import(writer: MemoryWriter, cmd: ImportCommand, job_id: str) -> dict[str, Any]:
    """The worker side: write the records in order, in chunks, one scope range per call."""
    counts = {"added": 0, "updated": 0, "duplicate": 0}
    outcomes: list[dict[str, Any]] = []
    new_ids = _new_ids(cmd)
    for start in range(0, len(cmd.records), IMPORT_CHUNK):
        chunk = cmd.records[start:start + IMPORT_CHUNK]
        groups: dict[tuple[Scope, str | None], list[int]] = {}
        for i, record in enumerate(chunk):
            groups.setdefault((record.resolved_scope(), record.project), []).append(i)
        results: dict[int, Any] = {}
        for (scope, project), indexes in groups.items():
            candidates = [candidate_of(chunk[i], cmd.received_at) for i in indexes]
            for c in candidates:
                c.episodes = [new_ids.get(e, e) for e in c.episodes]
            written = writer.write(cmd.owner, scope, project, candidates, job_id)
            results.update(zip(indexes, written, strict=True))
        for i in range(len(chunk)):
            result = results[i]
            counts[result.outcome.value] += 1
            outcomes.append({"index": start + i, "id": result.memory.id,
                             "outcome": result.outcome.value})
    return {"imported": len(cmd.records), **counts, "records": outcomes}

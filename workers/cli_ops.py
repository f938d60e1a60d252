"""What the operator commands of `memoryd` do, apart from printing: find the stack and its
key, shorten memory ids and resolve the short forms, read and check an import file, keep
the import checkpoint, summarise /metrics."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from memoryd.client import MemorydClient
from memoryd.platform.settings import Settings, env_file_path


class CliError(Exception):
    """A failure worth one clear line to the user, not a traceback."""


@dataclass(frozen=True)
class Target:
    url: str
    key: str | None
    key_source: str  # where the key came from; with no key, every place looked at


def dotenv_value(variable: str) -> str | None:
    """`variable` as the dotenv file settings are read from gives it (`env_file_path`), for
    the CLI's own variables (MEMORYD_URL, MEMORYD_API_KEY), which are not settings."""
    from dotenv import dotenv_values

    path = env_file_path()
    if path is None:
        return None
    for name, value in dotenv_values(path, encoding="utf-8").items():
        if name.upper() == variable and value:
            return value
    return None


def resolve_target(url: str | None, key: str | None, data_dir: Path | None = None,
                   operator: bool = False) -> Target:
    """`--url`/`MEMORYD_URL` (the environment, then the dotenv file), else the embedded
    stack's address from the settings; `--key`/`MEMORYD_API_KEY` (the same way), else the
    embedded stack's key file in the data directory. `operator`: the key is an operator
    key (`MEMORYD_OPERATOR_KEY`, `operator-key`)."""
    settings = Settings() if data_dir is None else Settings(data_dir=data_dir)
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
    base = (url or dotenv_value("MEMORYD_URL") or f"http://{host}:{settings.port}").rstrip("/")
    variable = "MEMORYD_OPERATOR_KEY" if operator else "MEMORYD_API_KEY"
    if key:
        return Target(base, key, f"--key / {variable}")
    dotenv = env_file_path()
    from_file = dotenv_value(variable)
    if from_file:
        return Target(base, from_file, f"{variable} in {dotenv}")
    path = settings.operator_key_file if operator else settings.api_key_file
    try:
        found = path.read_text(encoding="utf-8").strip()
    except OSError:
        found = ""
    if found:
        return Target(base, found, str(path))
    looked = ["--key", f"{variable} in the environment",
              f"{variable} in {dotenv}" if dotenv else "a .env file here (there is none)",
              f"{path} ({'empty' if path.exists() else 'no such file'})"]
    return Target(base, None, ", ".join(looked))


def missing_key_message(target: Target, operator: bool = False) -> str:
    """One line for a command that needs a key and found none: where it looked, what to do."""
    kind = "operator key" if operator else "API key"
    variable = "MEMORYD_OPERATOR_KEY" if operator else "MEMORYD_API_KEY"
    start = "" if operator else "; 'memoryd up' writes the key file of its data directory"
    return (f"no {kind} found; looked at: {target.key_source}. Pass --key or set {variable}"
            f"{start}")


# ---- short ids ---------------------------------------------------------------------

SHORT_ID = 8  # characters shown of a memory id in tables: 32 bits, as git's 7-8
MIN_PREFIX = 4  # the fewest characters a command accepts for a memory id
_FULL_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def short_ids(ids: list[str]) -> dict[str, str]:
    """Each id's shortest form of at least SHORT_ID characters that no other id of `ids`
    shares, so a table's ids fit one line and each names one memory."""
    shown: dict[str, str] = {}
    for memory_id in ids:
        length = SHORT_ID
        while length < len(memory_id) and any(
                other != memory_id and other.startswith(memory_id[:length]) for other in ids):
            length += 1
        shown[memory_id] = memory_id[:length]
    return shown


def resolve_memory_id(client: MemorydClient, user_id: str, given: str) -> str:
    """A full id as it is; else the one memory of the user whose id starts with `given`
    (as git resolves a short hash). None or several: CliError saying which."""
    text = given.strip().lower()
    if _FULL_ID.match(text):
        return text
    if len(text) < MIN_PREFIX or not re.fullmatch(r"[0-9a-f-]+", text):
        raise CliError(f"{given!r} is not a memory id: give the id, or at least its first "
                       f"{MIN_PREFIX} characters as tables show them")
    matches = [str(r["id"]) for r in client.export(user_id)
               if str(r.get("id", "")).startswith(text)]
    if not matches:
        raise CliError(f"no memory of user {user_id!r} has an id starting with {given!r}")
    if len(matches) > 1:
        named = ", ".join(sorted(short_ids(matches).values())[:5])
        raise CliError(f"the id prefix {given!r} is ambiguous: {len(matches)} memories of user "
                       f"{user_id!r} start with it ({named}); give more characters")
    return matches[0]


# ---- import files ----------------------------------------------------------------


@dataclass
class ImportFile:
    path: Path
    digest: str
    lines: list[tuple[int, str]]  # (line number, the line), blank lines left out


def read_import_file(path: Path) -> ImportFile:
    """Every record checked with the server's own model before anything is sent, so a bad
    file stops with its line number and reason and imports nothing."""
    # The model's module brings the write path with it (a second of imports): only the
    # import command pays for it, not every other command of the CLI.
    from memoryd.memories.transfer import ImportRecord

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    lines: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            document = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CliError(f"{path}:{number}: not valid JSON: {exc.msg} (column {exc.colno})") \
                from exc
        try:
            ImportRecord.model_validate(document)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error.get("loc", ())) or "record"
            reason = str(error.get("msg", "invalid")).replace("Value error, ", "")
            raise CliError(f"{path}:{number}: {where}: {reason}") from exc
        lines.append((number, line))
    if not lines:
        raise CliError(f"{path}: no records")
    return ImportFile(path, hashlib.sha256(raw).hexdigest(), lines)


@dataclass
class Checkpoint:
    """The last line whose batch the server accepted and finished, for one file and user."""

    path: Path
    file_sha256: str
    user_id: str
    line: int = 0
    done: bool = False

    @classmethod
    def load(cls, path: Path, source: ImportFile, user_id: str) -> Checkpoint:
        fresh = cls(path, source.digest, user_id)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return fresh
        if data.get("file_sha256") != source.digest or data.get("user_id") != user_id:
            return fresh  # another file or user: start over
        return cls(path, source.digest, user_id, int(data.get("line", 0)),
                   bool(data.get("done", False)))

    def save(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"file_sha256": self.file_sha256, "user_id": self.user_id,
                                   "line": self.line, "done": self.done}), encoding="utf-8")
        os.replace(tmp, self.path)  # a crash leaves the old checkpoint or the new, never half


@dataclass
class ImportReport:
    batches: int = 0
    records: int = 0
    counts: dict[str, int] = field(default_factory=lambda: {
        "added": 0, "updated": 0, "duplicate": 0})
    skipped: int = 0


def run_import(
    client: MemorydClient, user_id: str, source: ImportFile, checkpoint: Checkpoint,
    batch_size: int, progress: Callable[[int], None], wait_s: float = 600.0,
) -> ImportReport:
    """Send the lines after the checkpoint in batches; each batch's job must succeed before
    the checkpoint moves past it. A batch resent after a crash reuses its idempotency key,
    and the write path's deterministic ids make a re-imported record a duplicate."""
    report = ImportReport()
    pending = [(n, line) for n, line in source.lines if n > checkpoint.line]
    report.skipped = len(source.lines) - len(pending)
    progress(report.skipped)
    for start in range(0, len(pending), batch_size):
        batch = pending[start:start + batch_size]
        body = "".join(line + "\n" for _, line in batch).encode("utf-8")
        key = f"import:{source.digest[:32]}:{user_id}:{batch[0][0]}-{batch[-1][0]}"
        accepted = client.import_records(user_id, body, idempotency_key=key[:200])
        job = client.wait(accepted.job_id, timeout=wait_s)
        if job.status.value != "succeeded":
            error = job.error or {}
            raise CliError(f"the batch of lines {batch[0][0]}-{batch[-1][0]} failed: "
                           f"{error.get('code', 'failed')}: {error.get('message', '')}; "
                           f"run the same command again to resume after line {checkpoint.line}")
        result = job.result or {}
        for name in report.counts:
            report.counts[name] += int(result.get(name, 0))
        report.batches += 1
        report.records += len(batch)
        checkpoint.line = batch[-1][0]
        checkpoint.save()
        progress(len(batch))
    checkpoint.done = True
    checkpoint.save()
    return report


# ---- status ----------------------------------------------------------------------

_SAMPLE = re.compile(r"^([a-zA-Z_:]+)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def samples(text: str) -> Iterator[tuple[str, dict[str, str], float]]:
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match:
            yield match.group(1), dict(_LABEL.findall(match.group(2) or "")), float(
                match.group(3))


@dataclass
class StackStatus:
    queues: dict[str, int] = field(default_factory=dict)
    unacked: int = 0  # delivered to a worker, not acknowledged: running, reserved or held
    scheduled_by_task: dict[str, int] = field(default_factory=dict)  # held for a countdown
    failed_jobs: int = 0
    failures_by_task: dict[str, int] = field(default_factory=dict)
    stored: int | None = None


    @property
    def scheduled(self) -> int:
        return sum(self.scheduled_by_task.values())

    @property
    def running_or_reserved(self) -> int:
        """The unacknowledged messages not held for a countdown (the two are read one after
        the other at scrape, so never below 0)."""
        return max(0, self.unacked - self.scheduled)


def summarize_metrics(text: str) -> StackStatus:
    status = StackStatus()
    for name, labels, value in samples(text):
        if name == "memoryd_queue_depth":
            status.queues[labels.get("queue", "?")] = int(value)
        elif name == "memoryd_tasks_unacked":
            status.unacked = int(value)
        elif name == "memoryd_tasks_scheduled":
            status.scheduled_by_task[labels.get("task", "?")] = int(value)
        elif name == "memoryd_task_failures_total":
            status.failures_by_task[labels.get("task", "?")] = int(value)
            status.failed_jobs += int(value)
        elif name == "memoryd_memories_stored":
            status.stored = int(value)
    return status


def jsonable(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)

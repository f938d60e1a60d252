"""LLM extraction: redact → show the model the interaction and similar memories → validate
its operations → resolve conflicts → write.

Everything that can fail for a reason outside the store (the model call, its reply, the
judge) happens before the first write, so a failed job leaves nothing half-written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from memoryd.embeddings.parts import MemoryVector
from memoryd.extraction.ask import ask_json
from memoryd.extraction.forget_intent import has_forget_intent
from memoryd.extraction.interaction import episode_candidates, message_source
from memoryd.extraction.llm_prompt import extraction_messages
from memoryd.extraction.operations import (
    Action,
    Dropped,
    Planned,
    ReplyShape,
    Said,
    validate_operations,
)
from memoryd.extraction.redaction import redact
from memoryd.llm import ChatClient
from memoryd.memories.conflicts import Verdict, conflict_band, in_band, judge
from memoryd.memories.reads import visibility
from memoryd.memories.writes import (
    MemoryWriter,
    WriteResult,
    range_conditions,
    same_numbers,
    with_dropped,
)
from memoryd.platform import failpoints
from memoryd.platform.errors import ExtractorUnavailable
from memoryd.records.candidate import Candidate
from memoryd.records.commands import IngestCommand
from memoryd.records.identity import content_hash
from memoryd.records.models import MemoryKind, MemoryRecord, MemoryType, Owner, Role, Source
from memoryd.records.schemas import Message
from memoryd.store.conditions import Match, NoneOf

ACTOR = "llm"


class StepKind(StrEnum):
    """What applying a step does: the reply's operations, resolved against the store (an
    UPDATE whose content is already there is a NOOP: the memory is only refreshed)."""

    ADD = "ADD"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    NOOP = "NOOP"


@dataclass
class Step:
    """One validated operation, resolved against the store, ready to apply."""

    action: StepKind
    planned: Planned
    target: MemoryRecord | None = None
    vector: MemoryVector | None = None
    verdict: Verdict | None = None
    conflicts_with: MemoryRecord | None = None
    report: dict[str, Any] = field(default_factory=dict)


def _operations(data: dict[str, Any]) -> list[Any]:
    return ReplyShape.model_validate(data).operations


def redacted_messages(cmd: IngestCommand) -> list[Message]:
    return [m.model_copy(update={"content": redact(m.content)}) for m in cmd.messages]


class LLMExtraction:
    def __init__(
        self, writer: MemoryWriter, client: ChatClient | None, judge_client: ChatClient | None
    ) -> None:
        self.writer = writer
        self.settings = writer.settings
        if client is None or judge_client is None:
            raise ExtractorUnavailable("LLM extraction is not configured", field="extract")
        self.client = client
        self.judge_client = judge_client
        # The default extraction's turns in this run (`run`), their vectors, what they became.
        self.episodes: list[Candidate] = []
        self.episode_vectors: list[MemoryVector] = []
        self.episode_of: dict[int, str] = {}
        self.written: list[WriteResult] = []

    def run(self, cmd: IngestCommand, job_id: str) -> dict[str, Any]:
        messages = redacted_messages(cmd)
        # The default extraction keeps the turns too; they are embedded with the facts in
        # one model call (`_resolve`) and written before them, so each fact links to the
        # episodes of the messages it was drawn from.
        self.episodes = (episode_candidates(_with_messages(cmd, messages), job_id)
                         if cmd.episodes else [])
        users = [m for m in messages if m.role is Role.USER]
        if not users:
            if self.episodes:
                self._write_episodes(cmd, job_id, self.writer.embed(
                    [c.content for c in self.episodes]))
            return with_dropped(self._result([], []), cmd)
        when = max(m.created_at or cmd.received_at for m in users)
        aliases = self._similar(cmd.owner, cmd, "\n".join(m.content for m in users))
        # Fault drills stop here, mid-call, so a worker can be killed during the LLM call.
        failpoints.reach(failpoints.LLM_EXTRACT)
        raw_ops = ask_json(
            self.client, extraction_messages(messages, when, aliases),
            self.settings.llm_parse_retries, _operations, "extraction",
        )
        said = Said.of([m.content for m in users],
                       [m.content for m in messages if m.role is Role.ASSISTANT])
        planned, dropped = validate_operations(
            raw_ops, aliases, has_forget_intent(users[-1].content),
            self.settings.llm_min_confidence, said,
        )
        steps = self._resolve(cmd, planned, job_id)
        # Everything that can fail outside the store is done: the turns, then the facts.
        if self.episodes:
            self._write_episodes(cmd, job_id, self.episode_vectors)
        for step in steps:
            self._apply(cmd, step, when, job_id)
        return with_dropped(self._result(steps, dropped), cmd)

    def _write_episodes(self, cmd: IngestCommand, job_id: str,
                        vectors: list[MemoryVector]) -> None:
        self.written = self.writer.write(cmd.owner, cmd.scope, cmd.project, self.episodes,
                                         job_id, vectors=vectors)
        for candidate, result in zip(self.episodes, self.written, strict=True):
            for source in candidate.sources:
                if source.message_index is not None:
                    self.episode_of[source.message_index] = result.memory.id

    # ---- before any write ----------------------------------------------------

    def _similar(self, owner: Owner, cmd: IngestCommand, text: str) -> dict[str, MemoryRecord]:
        """This user's current memories nearest the interaction, under aliases m1, m2, …"""
        if self.settings.llm_max_existing == 0:
            return {}
        vector = self.writer.embedder.embed_query(text)
        # Episodes are the words themselves, not memories the model may update or delete.
        conds = [*visibility(None, cmd.project), Match("state", "active"), NOT_EPISODE]
        hits = self.writer.store.search(owner, vector.tolist(), conds,
                                    limit=self.settings.llm_max_existing)
        return {f"m{i}": MemoryRecord.from_payload(p.id, p.payload)
                for i, p in enumerate(hits, start=1)}

    def _resolve(self, cmd: IngestCommand, planned: list[Planned], job_id: str) -> list[Step]:
        writing = [p for p in planned if p.op.action is not Action.DELETE]
        texts = [*(c.content for c in self.episodes), *(p.content for p in writing)]
        # The planned writes are facts: each is read by its topics too.
        kinds = [*(c.kind for c in self.episodes), *(MemoryKind.FACT for _ in writing)]
        embedded = self.writer.embed(texts, kinds) if texts else []
        self.episode_vectors = embedded[: len(self.episodes)]
        vectors = embedded[len(self.episodes):] if writing else None
        vector_of = {p.index: vectors[i] for i, p in enumerate(writing)} if vectors is not None \
            else {}
        steps = []
        for p in planned:
            if p.op.action is Action.DELETE:
                steps.append(Step(StepKind.DELETE, p, target=p.target))
            elif p.op.action is Action.UPDATE:
                steps.append(Step(StepKind.UPDATE, p, target=p.target, vector=vector_of[p.index]))
            else:
                steps.append(self._judged(cmd, p, vector_of[p.index]))
        return steps

    def _judged(self, cmd: IngestCommand, p: Planned, vector: MemoryVector) -> Step:
        """An ADD whose nearest memory is in the conflict band gets the judge's verdict."""
        conds = [*range_conditions(cmd.scope, cmd.project), Match("state", "active"),
                 NOT_EPISODE]
        near = self.writer.store.search(cmd.owner, vector.dense.tolist(), conds, limit=1)
        if not near:
            return Step(StepKind.ADD, p, vector=vector)
        nearest = MemoryRecord.from_payload(near[0].id, near[0].payload)
        if nearest.content_hash == content_hash(p.content):
            return Step(StepKind.ADD, p, vector=vector)  # the writer reports the exact duplicate
        band = conflict_band(self.settings, self.writer.embedder.name)
        if not in_band(near[0].score, band, not same_numbers(p.content, nearest.content)):
            return Step(StepKind.ADD, p, vector=vector)
        verdict = judge(self.judge_client, nearest.content, p.content,
                        self.settings.llm_parse_retries)
        if verdict is Verdict.SAME_FACT:
            return Step(StepKind.NOOP, p, target=nearest, vector=vector, verdict=verdict)
        if verdict is Verdict.UPDATE_OLD:
            return Step(StepKind.UPDATE, p, target=nearest, vector=vector, verdict=verdict)
        if verdict is Verdict.CONFLICT:
            return Step(StepKind.ADD, p, vector=vector, verdict=verdict, conflicts_with=nearest)
        return Step(StepKind.ADD, p, vector=vector, verdict=verdict)

    # ---- writes ----------------------------------------------------------------

    def _candidate(self, cmd: IngestCommand, step: Step, when: Any, job_id: str) -> Candidate:
        op = step.planned.op
        kind = op.type or (step.target.type if step.target else MemoryType.SEMANTIC)
        drawn = drawn_from(step.planned.content, cmd.messages)
        return Candidate(
            content=step.planned.content, type=kind, occurred_at=when,
            source=Source.INTERACTION,
            category=op.category or (step.target.category if step.target else None),
            importance=op.importance or (step.target.importance if step.target else 5),
            confidence=op.confidence, thread_id=cmd.thread_id,
            metadata={**(cmd.metadata or {}), "extracted_by": ACTOR},
            kind=MemoryKind.FACT, sources=[message_source(cmd, i, job_id) for i in drawn],
            episodes=[self.episode_of[cmd.request_index(i)] for i in drawn
                      if cmd.request_index(i) in self.episode_of],
            sequenced=not cmd.episodes,
            created_at=cmd.received_at,
        )

    def _apply(self, cmd: IngestCommand, step: Step, when: Any, job_id: str) -> None:
        owner = cmd.owner
        report: dict[str, Any] = {"action": step.action.value, "operation": step.planned.index}
        if step.verdict is not None:
            report["verdict"] = step.verdict.value
        if step.action is StepKind.ADD:
            assert step.vector is not None
            [result] = self.writer.write(owner, cmd.scope, cmd.project,
                                         [self._candidate(cmd, step, when, job_id)], job_id,
                                         vectors=[step.vector])
            report.update(outcome=result.outcome.value, memory_id=result.memory.id,
                          content=result.memory.content)
            if result.duplicate_of:
                report["duplicate_of"] = result.duplicate_of
            if step.conflicts_with is not None and result.outcome.value == "added":
                self.writer.mark_conflict(owner, result.memory, step.conflicts_with)
                report["conflicts_with"] = step.conflicts_with.id
        elif step.action is StepKind.UPDATE:
            assert step.target is not None and step.vector is not None
            report.update(self.writer.supersede(owner, step.target.id,
                                                self._candidate(cmd, step, when, job_id),
                                                step.vector,
                                                job_id, ACTOR))
        elif step.action is StepKind.DELETE:
            assert step.target is not None
            chain = self.writer.delete_versions(owner, step.target.id, job_id, ACTOR)
            report.update(outcome="deleted" if chain else "skipped",
                          memory_id=step.target.id, versions=len(chain))
        else:
            assert step.target is not None
            report.update(self.writer.refresh(owner, step.target, job_id, ACTOR))
        step.report = report

    def _result(self, steps: list[Step], dropped: list[Dropped]) -> dict[str, Any]:
        applied = [s.report for s in steps]
        counts: dict[str, int] = {}
        for item in applied:
            counts[item["outcome"]] = counts.get(item["outcome"], 0) + 1
        kept = {}
        if self.episodes:
            # The default extraction: its episodes, as the rules path reports its memories.
            kept = {"default": True, "episodes": len(self.written),
                    "memories": [{"id": r.memory.id, "outcome": r.outcome.value,
                                  "content": r.memory.content, "kind": r.memory.kind.value}
                                 for r in self.written]}
        return {
            "extract": "llm",
            **{k: counts.get(k, 0) for k in ("added", "updated", "duplicate", "deleted",
                                              "noop", "skipped")},
            "applied": applied,
            "dropped": [d.to_json() for d in dropped],
            **kept,
        }


# Episodes are not memories an extractor reasons about (points of earlier versions have no
# kind stored, and pass).
NOT_EPISODE = NoneOf((Match("kind", MemoryKind.EPISODE.value),))
_WORDS = re.compile(r"[0-9a-z]{3,}|[\u3400-\u9fff]")


def _with_messages(cmd: IngestCommand, messages: list[Message]) -> IngestCommand:
    """`cmd` with `messages` (one for each of `cmd.messages`) in their places; messages it
    dropped stay, so provenance keeps counting positions as the request did."""
    said = iter(messages)
    full = [next(said) if m.says_something() else m for m in cmd.request.messages]
    return cmd.model_copy(update={"request": cmd.request.model_copy(
        update={"messages": full})})


def drawn_from(content: str, messages: list[Message]) -> list[int]:
    """The user messages a fact the model wrote was drawn from: those sharing the most
    words (Han characters, Latin words of three letters or more) with it, down to half the
    best overlap; every user message when none shares a word. The model names no source,
    so this is how its extraction is audited against the words it came from."""
    words = set(_WORDS.findall(content.casefold()))
    overlap = {i: len(words & set(_WORDS.findall(m.content.casefold())))
               for i, m in enumerate(messages) if m.role is Role.USER}
    best = max(overlap.values(), default=0)
    if best == 0:
        return list(overlap)
    return [i for i, n in overlap.items() if n * 2 >= best]


def extract_with_llm(
    writer: MemoryWriter,
    cmd: IngestCommand,
    job_id: str,
    *,
    client: ChatClient | None,
    judge_client: ChatClient | None,
) -> dict[str, Any]:
    """The LLM extraction of one interaction; `client` and `judge_client` None: refused
    (`extractor_unavailable`)."""
    return LLMExtraction(writer, client, judge_client).run(cmd, job_id)

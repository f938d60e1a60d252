"""The chat protocol: the path a chat server uses, measured as it is used.

Each conversation is posted turn by turn, one `POST /v1/interactions` per user message plus
the assistant message(s) after it, with no `extract` field (the default extraction and
settings); each message's own `metadata` carries its evidence id and `created_at` its time.
The jobs are waited for. Each question then asks `POST /v1/context` at its defaults (only
`user_id` and `query`) and counts as answered when one of the block's items holds a memory
whose `sources[*].metadata` (else the memory's own `metadata`) reaches an evidence turn. The
same question is asked of `POST /v1/search` at its defaults too, for the latency beside it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import httpx

from memoryd.evaluation import datasets as ds
from memoryd.evaluation import metrics as mx
from memoryd.evaluation.ingest import api_client, check, stored_memories, wait_job

RETRY_STATUSES = (429, 503)  # back-pressure: wait as told and post again
MAX_RETRY_WAIT_S = 5.0


@dataclass(frozen=True)
class ChatPost:
    """One interaction as a chat server posts it: a user turn and the replies after it."""

    idempotency_key: str
    thread_id: str
    turns: tuple[ds.ChatTurn, ...]


def chat_posts(dialogue: ds.Dialogue, prefix: str, max_messages: int) -> list[ChatPost]:
    """A user turn opens an interaction, the assistant turns after it join it; assistant
    turns before a session's first user turn go as an interaction of their own. An
    interaction longer than the gateway's `max_messages` is cut (a chat server would have
    posted the same messages)."""
    posts: list[ChatPost] = []
    for session, repeat in zip(dialogue.sessions, ds.repeats(dialogue.sessions), strict=True):
        groups: list[list[ds.ChatTurn]] = []
        for turn in session.turns:
            if turn.role == "user" or not groups:
                groups.append([turn])
            else:
                groups[-1].append(turn)
        for group in groups:
            for part in ds.chunks(group, max_messages):
                posts.append(ChatPost(
                    f"eval-chat-{prefix}-{dialogue.user_id}-{part[0].key}{repeat}",
                    session.thread_id, tuple(part)))
    return posts


def post_body(user_id: str, post: ChatPost, key_field: str) -> dict[str, Any]:
    """No `extract` and no `store_roles`: what the server does by default is measured."""
    return {
        "user_id": user_id, "thread_id": post.thread_id,
        "idempotency_key": post.idempotency_key,
        "messages": [
            {"role": t.role, "content": t.content, "created_at": t.created_at.isoformat(),
             "metadata": {key_field: t.key}}
            for t in post.turns
        ],
    }


def evidence_keys(memory: Mapping[str, Any], key_field: str) -> set[str]:
    """The evidence ids a memory reaches: each source's message metadata (the provenance
    contract), else the memory's own metadata (raw extraction merges the message's)."""
    keys = {str(s["metadata"][key_field]) for s in memory.get("sources") or []
            if isinstance(s, Mapping) and key_field in (s.get("metadata") or {})}
    own = (memory.get("metadata") or {}).get(key_field)
    if own is not None:
        keys.add(str(own))
    return keys


def _post(client: httpx.Client, body: dict[str, Any]) -> str:
    while True:
        response = client.post("/v1/interactions", json=body)
        if response.status_code in RETRY_STATUSES:
            wait = float(response.headers.get("Retry-After") or 0.5)
            time.sleep(min(max(wait, 0.05), MAX_RETRY_WAIT_S))
            continue
        return str(check(response, f"post {body['idempotency_key']}")["job_id"])


def post_user(base_url: str, user_id: str, posts: Sequence[ChatPost], key_field: str,
              stop: threading.Event) -> list[str]:
    """A user's turns in order, as they happen: each posted without waiting for the last."""
    jobs: list[str] = []
    with api_client(base_url) as client:
        for post in posts:
            if stop.is_set():
                break
            jobs.append(_post(client, post_body(user_id, post, key_field)))
        for job in jobs:
            wait_job(client, job)
    return jobs


def count_memories(client: httpx.Client, user_id: str) -> int:
    return sum(1 for _ in stored_memories(client, user_id))


@dataclass
class ChatIngest:
    turns: int
    interactions: int
    memories: int
    seconds: float
    # Memories the users had before this run posted anything: a rerun on a kept store
    # (`--data-dir`) reposts turns already stored, so its rate is no ingest rate.
    memories_before: int = 0


def ingest_chat(base_url: str, dialogues: Sequence[ds.Dialogue], key_field: str, prefix: str,
                max_messages: int, concurrency: int) -> ChatIngest:
    """Users in parallel (`concurrency` at a time), each user's turns in order; the clock
    stops when the last job has finished."""
    plans = {d.user_id: chat_posts(d, prefix, max_messages) for d in dialogues}
    with api_client(base_url) as client:
        before = sum(count_memories(client, user) for user in plans)
    stop = threading.Event()
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(concurrency, 1)) as pool:
        futures = [pool.submit(post_user, base_url, user, posts, key_field, stop)
                   for user, posts in plans.items()]
        try:
            for future in futures:
                future.result()
        finally:
            stop.set()
    seconds = time.perf_counter() - started
    with api_client(base_url) as client:
        memories = sum(count_memories(client, user) for user in plans)
    return ChatIngest(
        turns=sum(d.turn_count() for d in dialogues),
        interactions=sum(len(p) for p in plans.values()), memories=memories, seconds=seconds,
        memories_before=before)


@dataclass(frozen=True)
class ChatAnswer:
    qid: str
    category: str
    evidence: bool  # an item of the block reaches an evidence turn
    empty: bool  # the block holds nothing
    items: int
    tokens: int
    context_ms: float
    search_evidence: bool  # /v1/search at its defaults returned an evidence memory
    search_ms: float
    # The best search hit's score (None: no hit): what the block's gate reads (0027).
    top_score: float | None = None
    # With --calibration: the same question asked of another user of the set (who has none
    # of its memories) got an empty block, and that user's best search score; None when
    # not asked (or, for the score, no hit).
    other_empty: bool | None = None
    other_top_score: float | None = None
    # The second pass (`ask_all`): both routes timed again in the other order; None when
    # not asked twice.
    context_ms_again: float | None = None
    search_ms_again: float | None = None

    def context_times(self) -> list[float]:
        return [self.context_ms, *([] if self.context_ms_again is None
                                   else [self.context_ms_again])]

    def search_times(self) -> list[float]:
        return [self.search_ms, *([] if self.search_ms_again is None
                                  else [self.search_ms_again])]


def ask(client: httpx.Client, question: ds.Question, key_field: str, context_first: bool
        ) -> ChatAnswer:
    """`/v1/context` and `/v1/search`, each at its defaults, on the same question; which
    goes first alternates from question to question so neither always finds a warm cache."""
    body = {"user_id": question.user_id, "query": question.query}
    relevant = set(question.relevant)

    def context() -> tuple[dict[str, Any], float]:
        began = time.perf_counter()
        response = client.post("/v1/context", json=body)
        return check(response, f"context {question.qid}"), (time.perf_counter() - began) * 1000

    def search() -> tuple[dict[str, Any], float]:
        began = time.perf_counter()
        response = client.post("/v1/search", json=body)
        return check(response, f"search {question.qid}"), (time.perf_counter() - began) * 1000

    if context_first:
        (block, context_ms), (found, search_ms) = context(), search()
    else:
        (found, search_ms), (block, context_ms) = search(), context()
    items = block.get("items") or []
    return ChatAnswer(
        qid=question.qid, category=question.category,
        evidence=any(evidence_keys(i["memory"], key_field) & relevant for i in items),
        empty=not items, items=len(items), tokens=int(block.get("tokens") or 0),
        context_ms=round(context_ms, 3),
        search_evidence=any(evidence_keys(h["memory"], key_field) & relevant
                            for h in found.get("results") or []),
        search_ms=round(search_ms, 3),
        top_score=_top_score(found),
    )


def _top_score(found: dict[str, Any]) -> float | None:
    results = found.get("results") or []
    return round(float(results[0]["score"]), 4) if results else None


def other_block_empty(client: httpx.Client, question: ds.Question, other: str
                      ) -> tuple[bool, float | None]:
    """Whether `other`, a user who has none of the question's memories, gets no block, and
    the score of that user's best search hit (for the gate's study, decision 0027)."""
    body = {"user_id": other, "query": question.query}
    response = client.post("/v1/context", json=body)
    empty = not (check(response, f"context {question.qid} of {other}").get("items") or [])
    found = check(client.post("/v1/search", json=body), f"search {question.qid} of {other}")
    return empty, _top_score(found)


def ask_all(base_url: str, questions: Sequence[ds.Question], key_field: str,
            other_of: Callable[[str], str | None] | None = None) -> list[ChatAnswer]:
    """Each question at its defaults; with `other_of` (--calibration) also of the user it
    names, untimed.

    Every question is asked twice, in two passes over the set, the routes in one order the
    first time and in the other the second: whichever goes first for a user meets that
    user's points cold (the questions in between read other users), so each route is timed
    once cold and once warm on every question. On a set of a few dozen questions one pass
    leaves a p95 to two or three requests and to which route happened to go first for
    them. The figures are the first pass's; the second only times."""
    with api_client(base_url) as client:
        if questions:  # untimed warm-up: first-use costs of both routes
            ask(client, questions[0], key_field, True)
        answers = []
        for i, q in enumerate(questions):
            answer = ask(client, q, key_field, i % 2 == 0)
            other = other_of(q.user_id) if other_of is not None else None
            if other is not None:
                empty, score = other_block_empty(client, q, other)
                answer = replace(answer, other_empty=empty, other_top_score=score)
            answers.append(answer)
        for i, (q, answer) in enumerate(zip(questions, answers, strict=True)):
            again = ask(client, q, key_field, i % 2 == 1)
            answers[i] = replace(answer, context_ms_again=again.context_ms,
                                 search_ms_again=again.search_ms)
        return answers


@dataclass
class ChatFigures:
    """What the chat protocol reports for a group of questions."""

    count: int
    evidence_in_block: float
    empty_blocks: int
    search_evidence: float
    tokens_mean: float
    tokens_p95: float
    # --calibration: the share of questions asked of another user that got an empty block.
    other_user_empty: float | None = None

    @classmethod
    def of(cls, answers: Sequence[ChatAnswer]) -> ChatFigures:
        tokens = [float(a.tokens) for a in answers]
        others = [float(a.other_empty) for a in answers if a.other_empty is not None]
        return cls(
            count=len(answers),
            evidence_in_block=round(mx.mean([float(a.evidence) for a in answers]), 4),
            empty_blocks=sum(a.empty for a in answers),
            search_evidence=round(mx.mean([float(a.search_evidence) for a in answers]), 4),
            tokens_mean=round(mx.mean(tokens), 1),
            tokens_p95=round(mx.percentile(tokens, 95), 1),
            other_user_empty=round(mx.mean(others), 4) if others else None,
        )


def by_category(answers: Sequence[ChatAnswer], order: Iterable[str]
                ) -> dict[str, ChatFigures]:
    seen = list(dict.fromkeys([*order, *(a.category for a in answers)]))
    groups = {c: [a for a in answers if a.category == c] for c in seen}
    return {c: ChatFigures.of(g) for c, g in groups.items() if g}


@dataclass
class ChatReport:
    dataset: str
    name: str
    embedder: str
    started_at: str
    inputs: dict[str, str]
    git: dict[str, Any]
    settings: dict[str, Any]
    counts: dict[str, int]
    ingest: dict[str, float]
    overall: ChatFigures
    categories: dict[str, ChatFigures]
    latency: dict[str, dict[str, float]]  # "context" and "search": mean_ms, p95_ms
    questions: list[ChatAnswer] = field(default_factory=list)
    protocol: str = "chat"
    wall_time_s: float = 0.0
    machine: dict[str, Any] = field(default_factory=dict)  # as `EvalReport.machine`


def chat_report(
    *, dataset: str, name: str, embedder: str, started_at: datetime, inputs: dict[str, str],
    git: dict[str, Any], settings: dict[str, Any], outcome: ChatIngest,
    answers: Sequence[ChatAnswer], order: Sequence[str], counts: dict[str, int],
    machine: dict[str, Any] | None = None,
) -> ChatReport:
    return ChatReport(
        dataset=dataset, name=name, embedder=embedder,
        started_at=started_at.astimezone(UTC).isoformat(), inputs=inputs, git=git,
        settings=settings, counts=counts,
        ingest={
            "seconds": round(outcome.seconds, 2), "turns": outcome.turns,
            "interactions": outcome.interactions, "memories": outcome.memories,
            "turns_per_s": round(outcome.turns / max(outcome.seconds, 1e-9), 2),
            "memories_per_turn": round(outcome.memories / max(outcome.turns, 1), 3),
            "memories_before": outcome.memories_before,
        },
        overall=ChatFigures.of(answers), categories=by_category(answers, order),
        latency={
            "context": mx.latency_summary([t for a in answers for t in a.context_times()]),
            "search": mx.latency_summary([t for a in answers for t in a.search_times()]),
        },
        questions=list(answers), machine=machine or {},
    )

"""An evaluation run: the real embedded stack, ingest over HTTP through the write path, then
every question through `POST /v1/search` in each mode, against the same store."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from memoryd.evaluation import EvalError, chat
from memoryd.evaluation import datasets as ds
from memoryd.evaluation import metrics as mx
from memoryd.evaluation.crowd import store_crowd
from memoryd.evaluation.ingest import api_client, check, ingest
from memoryd.evaluation.report import (
    EvalReport,
    ModeResult,
    default_out_path,
    git_state,
    identical_modes,
    render,
    render_chat,
    write_json,
)
from memoryd.platform.host import machine_info
from memoryd.platform.settings import Settings
from memoryd.records.schemas import SearchMode

STACK_SETTINGS = ("embedder", "query_cache_size", "worker_concurrency", "max_messages",
                  "long_memory_parts", "max_content_chars", "max_message_bytes")
DATASETS = ("locomo", "madial", "longmemeval")


@dataclass(frozen=True)
class EvalOptions:
    dataset: str  # "locomo", "madial" or "longmemeval"
    modes: list[str]
    data: Path | None = None
    memory: Path | None = None
    # MADial: the same memories in another language, whose odd ids replace --memory's (a
    # mixed archive: docs/decisions/0030-cross-lingual-keyword-bridge.md).
    odd_memory: Path | None = None
    dialogue: Path | None = None
    embedder: str | None = None
    data_dir: Path | None = None
    limit_conversations: int | None = None
    limit_questions: int | None = None
    as_of: datetime | None = None
    top_k: int = 10
    calibration: bool = False  # also ask each question of another user (`calibration_of`)
    name: str | None = None  # the set's name in reports (default: the dataset's)
    long_turns: int | None = None  # LoCoMo: join turns into memories of this many characters
    per_category: int | None = None  # the first N questions of each category (quick runs)
    protocol: str = "ranking"  # "ranking" (raw memories, /v1/search) or "chat"
    crowd: int = 0  # memories of unrelated users stored first (`memoryd.evaluation.crowd`)


def parse_as_of(value: str | None) -> datetime | None:
    """An ISO time for the recency boost; one without a zone is UTC."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise EvalError(f"--as-of must be an ISO time, got {value!r}") from exc
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed


_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")


def parse_name(value: str | None) -> str | None:
    """`--name`: it names the report's file, so lowercase letters, digits and dashes."""
    if value is not None and not _NAME.fullmatch(value):
        raise EvalError(f"--name takes 1-40 lowercase letters, digits and dashes; got {value!r}")
    return value


def crowd_first(options: EvalOptions, base_url: str, concurrency: int,
                say: Callable[[str], None]) -> dict[str, Any]:
    """Store `--crowd` memories of unrelated users before the set; what to report of it."""
    if options.crowd <= 0:
        return {}
    say(f"storing {options.crowd} memories of unrelated users first (--crowd)")
    crowd = store_crowd(base_url, options.crowd, concurrency)
    say(f"crowd stored in {crowd.seconds:.1f} s ({crowd.users} users)")
    return {"crowd_memories": crowd.memories, "crowd_users": crowd.users,
            "crowd_seconds": round(crowd.seconds, 2)}


def parse_modes(values: Sequence[str]) -> list[str]:
    """`--mode dense --mode keyword,hybrid` → ['dense', 'keyword', 'hybrid'], order kept."""
    modes = [m.strip().lower() for v in values for m in v.split(",") if m.strip()]
    allowed = [m.value for m in SearchMode]
    unknown = [m for m in modes if m not in allowed]
    if unknown or not modes:
        raise EvalError(f"--mode takes {', '.join(allowed)}; got {', '.join(unknown) or 'none'}")
    return list(dict.fromkeys(modes))


# Starts the stack an evaluation runs against, given a data directory (None: a temporary
# one) and an embedder spec (None: the default), and yields its base URL and settings.
StackFactory = Callable[[Path | None, str | None], AbstractContextManager[tuple[str, Settings]]]


RELEVANT = 0.5  # the score from which a hit is labelled `relevant` (or `high`)


def calibration_of(
    top_hits: Sequence[tuple[str, float] | None], relevant: Sequence[Sequence[str]],
    others_best: Sequence[float],
) -> dict[str, float]:
    """Whether scores mean "about what was asked", from each question's top hit (its key
    and score; None: no hit) and its evidence, and the best score the same question got
    from a user without that memory: how often an evidence-bearing top hit is labelled at
    least `relevant`, and how often the other user's search labels nothing `relevant`."""
    evidence = [hit[1] for hit, keys in zip(top_hits, relevant, strict=True)
                if hit is not None and hit[0] in keys]
    return {
        "evidence_top_hits": float(len(evidence)),
        "top_hit_labelled_relevant": (sum(s >= RELEVANT for s in evidence) / len(evidence)
                                      if evidence else math.nan),
        "other_user_questions": float(len(others_best)),
        "other_user_nothing_relevant": (sum(s < RELEVANT for s in others_best)
                                        / len(others_best) if others_best else math.nan),
    }


def other_user(users: Sequence[str], user: str) -> str | None:
    """Another user of the set, who has none of `user`'s memories: the next one in order."""
    if len(users) < 2 or user not in users:
        return None
    return users[(users.index(user) + 1) % len(users)]


def run_mode(
    base_url: str, mode: str, questions: Sequence[ds.Question], key_field: str,
    options: EvalOptions, specs: Sequence[mx.MetricSpec], order: Sequence[str],
    users: Sequence[str] = (),
) -> ModeResult:
    rows: list[mx.ScoredQuestion] = []
    rankings: dict[str, list[str]] = {}
    tops: list[tuple[str, float] | None] = []
    evidence: list[tuple[str, ...]] = []
    others: list[float] = []
    with api_client(base_url) as client:
        def search(q: ds.Question, user: str) -> tuple[list[tuple[str, float]], float]:
            body: dict[str, Any] = {"user_id": user, "query": q.query,
                                    "top_k": options.top_k, "mode": mode}
            as_of = options.as_of or q.as_of  # `--as-of`, else the question's own date
            if as_of is not None:
                body["as_of"] = as_of.isoformat()
            began = time.perf_counter()
            response = client.post("/v1/search", json=body)
            latency = (time.perf_counter() - began) * 1000
            hits = check(response, f"search ({mode}) {q.qid}")["results"]
            return [(str(h["memory"]["metadata"].get(key_field)), float(h["score"]))
                    for h in hits], latency

        if questions:
            search(questions[0], questions[0].user_id)  # untimed warm-up: first-use costs
        for q in questions:
            hits, latency = search(q, q.user_id)
            ranked = [key for key, _ in hits]
            rankings[q.qid] = ranked
            rows.append(mx.score_question(q.qid, q.category, ranked, q.relevant, latency, specs,
                                          q.sessions, ds.session_of))
            other = other_user(users, q.user_id) if options.calibration else None
            if other is not None:
                tops.append(hits[0] if hits else None)
                evidence.append(q.relevant)
                elsewhere, _ = search(q, other)  # not timed: latency is the question's own
                others.append(max((score for _, score in elsewhere), default=0.0))
    calibration = calibration_of(tops, evidence, others) if tops else None
    return ModeResult(
        mode=mode, overall=mx.summarize_group(rows, specs),
        categories=mx.summarize_by_category(rows, specs, order),
        latency=mx.latency_summary([r.latency_ms for r in rows]), questions=rows,
        rankings=rankings, calibration=calibration,
    )


def load_dataset(
    options: EvalOptions, max_messages: int
) -> tuple[ds.Corpus, ds.QuestionSet, dict[str, str]]:
    """The dataset's files, or an EvalError naming what is missing or malformed."""
    with data_errors(options.dataset):
        return _load_files(options, max_messages)


@contextmanager
def data_errors(dataset: str) -> Iterator[None]:
    """A data file that cannot be read, or is not in the benchmark's format, as an EvalError
    naming what is wrong."""
    try:
        yield
    except OSError as exc:
        raise EvalError(f"cannot read {exc.filename or 'the data'}: {exc.strerror}") from exc
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise EvalError(
            f"{dataset} data is not in the benchmark's format "
            f"(see ../shared/bench/README.md): {type(exc).__name__}: {exc}"
        ) from exc


def locomo_input(
    options: EvalOptions,
) -> tuple[list[ds.Conversation], ds.QuestionSet, dict[str, str]]:
    """LoCoMo's conversations and questions as the options ask (a limit, long turns), and
    what was read, for either protocol."""
    if options.data is None:
        raise EvalError("locomo needs --data <locomo10.json>")
    convs, qset = ds.load_locomo(options.data, options.limit_conversations)
    inputs = {"data": str(options.data)}
    if options.long_turns is not None:
        convs, qset = ds.long_turns(convs, qset, options.long_turns)
        inputs["long_turns"] = str(options.long_turns)
    return convs, qset, inputs


def _load_files(
    options: EvalOptions, max_messages: int
) -> tuple[ds.Corpus, ds.QuestionSet, dict[str, str]]:
    if options.dataset == "locomo":
        convs, qset, inputs = locomo_input(options)
        return ds.locomo_corpus(convs, max_messages), qset, inputs
    if options.dataset == "madial":
        if options.memory is None or options.dialogue is None:
            raise EvalError("madial needs --memory <memory.json> and --dialogue <dialogue.json>")
        memories = ds.load_madial_memories(options.memory)
        if options.odd_memory is not None:
            try:
                memories = ds.mixed_madial_memories(
                    memories, ds.load_madial_memories(options.odd_memory))
            except ValueError as exc:
                raise EvalError(f"--odd-memory: {exc}") from exc
        known: dict[str, set[str]] = {}
        for m in memories:
            known.setdefault(m.user_id, set()).add(m.memory_id)
        qset = ds.load_madial_questions(options.dialogue, known)
        inputs = {"memory": str(options.memory), "dialogue": str(options.dialogue)}
        if options.odd_memory is not None:
            inputs["odd_memory"] = str(options.odd_memory)
        return ds.madial_corpus(memories, max_messages), qset, inputs
    if options.dataset == "longmemeval":
        if options.data is None:
            raise EvalError("longmemeval needs --data <longmemeval_s_*.json[.xz]>")
        lme = ds.load_longmemeval(options.data)
        corpus = ds.dialogue_corpus(lme.dialogues, max_messages, "lme")
        corpus.left_out = lme.empty_turns
        return corpus, lme.questions, {"data": str(options.data)}
    raise EvalError(f"unknown dataset {options.dataset!r}: {', '.join(DATASETS)}")


def select_questions(options: EvalOptions, questions: list[ds.Question]) -> list[ds.Question]:
    # A MADial dialogue is the conversation: its limit cuts dialogues, not the memory
    # archive. A LongMemEval question is a user of its own with its own haystack, so its
    # limit cuts questions, and with them the haystacks ingested (`only_asked`).
    if options.dataset in ("madial", "longmemeval") and options.limit_conversations is not None:
        questions = questions[: options.limit_conversations]
    if options.per_category is not None:
        taken: dict[str, int] = {}
        kept = []
        for q in questions:
            taken[q.category] = taken.get(q.category, 0) + 1
            if taken[q.category] <= options.per_category:
                kept.append(q)
        questions = kept
    return questions[: options.limit_questions]


def limits_of(options: EvalOptions) -> dict[str, str]:
    """The options that cut the set, and `--crowd`, as the report's inputs (the page's
    command repeats them)."""
    limits = {"limit_conversations": options.limit_conversations,
              "limit_questions": options.limit_questions, "per_category": options.per_category,
              "crowd": options.crowd or None}
    return {k: str(v) for k, v in limits.items() if v is not None}


def metric_specs(dataset: str) -> tuple[Sequence[mx.MetricSpec], list[str]]:
    """The dataset's metrics and the order of its categories."""
    if dataset == "locomo":
        return mx.LOCOMO_METRICS, list(ds.LOCOMO_CATEGORIES.values())
    if dataset == "longmemeval":
        return mx.LONGMEMEVAL_METRICS, list(ds.LONGMEMEVAL_TYPES)
    return mx.MADIAL_METRICS, ["all"]


def only_asked(corpus: ds.Corpus, questions: Sequence[ds.Question]) -> ds.Corpus:
    """LongMemEval: each question is a user of its own, whose haystack no other question
    reads, so a subset of questions ingests only their haystacks."""
    asked = {q.user_id for q in questions}
    return ds.Corpus(corpus.key_field, {u: i for u, i in corpus.users.items() if u in asked},
                     corpus.store_roles, corpus.left_out)


def run_evaluation(
    options: EvalOptions, stack: StackFactory, console: Console | None = None
) -> EvalReport:
    """The whole run on the stack `stack` starts, with progress lines on `console` when one
    is given."""
    def say(text: str) -> None:
        if console is not None:
            console.print(text)

    began, started_at = time.perf_counter(), datetime.now(UTC)
    # The code measured is the code at the start: a commit made during an hour's run
    # would otherwise be credited with it.
    git = git_state()
    corpus, qset, inputs = load_dataset(options, Settings().max_messages)
    inputs = {**inputs, **limits_of(options)}
    questions = select_questions(options, qset.questions)
    if options.dataset == "longmemeval":
        corpus = only_asked(corpus, questions)
    specs, order = metric_specs(options.dataset)
    with stack(options.data_dir, options.embedder) as (base_url, settings):
        crowd = crowd_first(options, base_url, settings.worker_concurrency, say)
        items = sum(len(i.items) for inters in corpus.users.values() for i in inters)
        say(f"ingesting {items} items for {len(corpus.users)} users through {base_url}")
        outcome = ingest(base_url, corpus, settings.worker_concurrency)
        say(f"ingested in {outcome.seconds:.1f} s; {outcome.memories} memories stored")
        results = []
        for mode in options.modes:
            say(f"searching {len(questions)} questions, mode={mode}")
            results.append(run_mode(base_url, mode, questions, corpus.key_field, options,
                                    specs, order, list(corpus.users)))
        embedder = settings.embedder
        used = {k: v for k, v in settings.model_dump(mode="json").items()
                if k.startswith("search_") or k in STACK_SETTINGS}
    merged_away = sum(
        1 for q in questions if set(q.relevant) & outcome.merged.get(q.user_id, set())
    )
    return EvalReport(
        dataset=options.dataset, name=options.name or options.dataset, embedder=embedder,
        modes=list(options.modes),
        top_k=options.top_k, as_of=options.as_of.isoformat() if options.as_of else None,
        started_at=started_at.isoformat(), inputs=inputs, git=git, settings=used,
        machine=machine_info(),
        counts={
            "users": len(corpus.users), "items": outcome.items, "memories": outcome.memories,
            "merged_items": outcome.items - outcome.memories,
            "questions_evaluated": len(questions),
            "questions_skipped_no_evidence": qset.skipped_no_evidence,
            "questions_ignored_category": qset.ignored_category,
            "questions_left_out_by_limit": len(qset.questions) - len(questions),
            "questions_with_merged_evidence": merged_away,
            "unresolved_evidence_ids": len(qset.unresolved_ids),
            "empty_turns_left_out": corpus.left_out,
            "crowd_memories": int(crowd.get("crowd_memories", 0)),
        },
        ingest={
            "seconds": round(outcome.seconds, 2), "jobs": outcome.jobs,
            # Each item is one decision of the write path (added or merged as a duplicate).
            "memories_per_s": round(outcome.items / max(outcome.seconds, 1e-9), 2),
            **({"crowd_seconds": crowd["crowd_seconds"], "crowd_users": crowd["crowd_users"]}
               if crowd else {}),
        },
        results=results, unresolved_ids=qset.unresolved_ids,
        merged_keys=sorted(f"{u}/{k}" for u, keys in outcome.merged.items() for k in keys),
        warnings=identical_modes(results), wall_time_s=round(time.perf_counter() - began, 2),
    )


PROTOCOLS = ("ranking", "chat")


def parse_protocol(value: str) -> str:
    if value not in PROTOCOLS:
        raise EvalError(f"--protocol takes {' or '.join(PROTOCOLS)}; got {value!r}")
    return value


def load_dialogues(options: EvalOptions) -> tuple[list[ds.Dialogue], ds.QuestionSet,
                                                   dict[str, str], str, int]:
    """The chat protocol's input: each user's conversation with roles, the questions, what
    was read, the metadata field that carries a turn's evidence id, and how many turns
    were left out as empty."""
    with data_errors(options.dataset):
        if options.dataset == "locomo":
            convs, qset, inputs = locomo_input(options)
            return ds.locomo_dialogues(convs), qset, inputs, "dia_id", 0
        if options.dataset == "longmemeval":
            if options.data is None:
                raise EvalError("longmemeval needs --data <longmemeval_s_*.json[.xz]>")
            lme = ds.load_longmemeval(options.data)
            return lme.dialogues, lme.questions, {"data": str(options.data)}, "turn", \
                lme.empty_turns
    raise EvalError(f"--protocol chat takes locomo or longmemeval, not {options.dataset!r} "
                    "(MADial has no conversation to post)")


def run_chat(
    options: EvalOptions, stack: StackFactory, console: Console | None = None
) -> chat.ChatReport:
    """The chat protocol (`memoryd.evaluation.chat`) on the stack `stack` starts."""
    def say(text: str) -> None:
        if console is not None:
            console.print(text)

    began, started_at = time.perf_counter(), datetime.now(UTC)
    # The code measured is the code at the start: a commit made during an hour's run
    # would otherwise be credited with it.
    git = git_state()
    dialogues, qset, inputs, key_field, left_out = load_dialogues(options)
    inputs = {**inputs, **limits_of(options)}
    questions = select_questions(options, qset.questions)
    if options.dataset == "longmemeval":  # each question is a user of its own
        asked = {q.user_id for q in questions}
        dialogues = [d for d in dialogues if d.user_id in asked]
    _, order = metric_specs(options.dataset)
    name = options.name or options.dataset
    with stack(options.data_dir, options.embedder) as (base_url, settings):
        crowd = crowd_first(options, base_url, settings.worker_concurrency, say)
        turns = sum(d.turn_count() for d in dialogues)
        say(f"posting {turns} turns of {len(dialogues)} users, turn by turn, through "
            f"{base_url}")
        outcome = chat.ingest_chat(base_url, dialogues, key_field, name,
                                   settings.max_messages, settings.worker_concurrency)
        say(f"ingested in {outcome.seconds:.1f} s; {outcome.memories} memories stored")
        say(f"asking {len(questions)} questions of /v1/context and /v1/search")
        users = [d.user_id for d in dialogues]
        answers = chat.ask_all(base_url, questions, key_field,
                               (lambda u: other_user(users, u)) if options.calibration
                               else None)
        used = {k: v for k, v in settings.model_dump(mode="json").items()
                if k.startswith(("search_", "context_", "extract")) or k in STACK_SETTINGS}
        embedder = settings.embedder
    report = chat.chat_report(
        dataset=options.dataset, name=name, embedder=embedder, started_at=started_at,
        inputs=inputs, git=git, machine=machine_info(), settings=used,
        outcome=outcome, answers=answers,
        order=order, counts={
            "users": len(dialogues), "questions_evaluated": len(questions),
            "questions_skipped_no_evidence": qset.skipped_no_evidence,
            "questions_ignored_category": qset.ignored_category,
            "questions_left_out_by_limit": len(qset.questions) - len(questions),
            "unresolved_evidence_ids": len(qset.unresolved_ids),
            "empty_turns_left_out": left_out,
            "crowd_memories": int(crowd.get("crowd_memories", 0)),
        },
    )
    report.wall_time_s = round(time.perf_counter() - began, 2)
    return report


def run_command(
    options: EvalOptions, stack: StackFactory, out: Path | None, console: Console
) -> Path:
    """`memoryd eval`: run, print a table per mode (or the chat figures), write the JSON."""
    now = datetime.now(UTC)
    if options.protocol == "chat":
        chat_result = run_chat(options, stack, console)
        render_chat(chat_result, console)
        path = write_json(chat_result,
                          default_out_path(f"chat-{chat_result.name}", now, out))
        wall = chat_result.wall_time_s
    else:
        report = run_evaluation(options, stack, console)
        render(report, console)
        path = write_json(report, default_out_path(report.name, now, out))
        wall = report.wall_time_s
    console.print(f"report written to {path} (wall time {wall:.1f} s)")
    return path

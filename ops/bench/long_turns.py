"""The long-turn ingest phase: raw ingest of chat turns a thousand characters long.

Real transcripts' turns are long (LongMemEval's average about 1,000 characters, a fifth
over 2,000); LoCoMo's are short. The texts here are LoCoMo's own consecutive turns joined,
one per line, into turns whose lengths cycle through the shape `memoryd eval --long-turns`
uses (shared/evaluation/datasets.py), so some run past e5's 512-token window. One stack
per setting: long memories in passages (the default) and whole
(`MEMORYD_LONG_MEMORY_PARTS=false`), each with one worker at its default threads; and the
default extraction as a chat server posts it (`default`: no `extract`, a user turn and an
assistant turn per interaction, both kept as episodes, with the rules' facts beside them).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memoryd.embeddings import make_embedder
from memoryd.embeddings.parts import embed_memories, split_parts
from memoryd.evaluation.datasets import LONG_TURN_SHAPE
from memoryd.evaluation.ingest import stored_memories
from memoryd.extraction.topics import topic_reading
from memoryd.platform.settings import Settings
from ops.bench.common import Options
from ops.bench.fill import Locomo
from ops.bench.writes import (
    chars_mean,
    enqueue,
    finished_at,
    interaction,
    wait_all,
    warm_up_writes,
)
from ops.stack import Stack, log

LONG_CHARS = 1000
SETTINGS = {"parts": "true", "whole": "false", "default": "true"}  # MEMORYD_LONG_MEMORY_PARTS
CEILING_TEXTS = 40


def long_texts(turns: Sequence[str], n: int, chars: int = LONG_CHARS) -> list[str]:
    """`n` long turns, each consecutive LoCoMo turns joined until past its length."""
    out: list[str] = []
    shape = itertools.cycle(LONG_TURN_SHAPE)
    group: list[str] = []
    length = chars * next(shape)
    for turn in itertools.cycle(turns):
        group.append(turn)
        if sum(len(t) + 1 for t in group) > length:
            out.append("\n".join(group))
            group, length = [], chars * next(shape)
            if len(out) == n:
                return out
    raise ValueError("no LoCoMo turns to build long turns from")


def embedder_alone(name: str, texts: Sequence[str], in_parts: bool) -> float:
    """Long turns per second of the model alone, one turn per call, as a job embeds it."""
    embedder = make_embedder(name, Settings(embedder=name))
    embed_memories(embedder, texts[:2], in_parts)  # loads the model
    started = time.perf_counter()
    for text in texts:
        embed_memories(embedder, [text], in_parts)
    return round(len(texts) / (time.perf_counter() - started), 2)


def chat_interaction(user_id: str, said: str, answer: str) -> dict[str, Any]:
    """A turn as a chat server posts it: the user's message and the answer, no `extract`."""
    return {"user_id": user_id, "thread_id": f"{user_id}-chat",
            "messages": [{"role": "user", "content": said},
                         {"role": "assistant", "content": answer}]}


def run_long_ingest(stack: Stack, texts: Sequence[str], in_parts: bool,
                    default: bool = False) -> dict[str, Any]:
    """`default`: each interaction is a user turn and an assistant turn (the next text)
    under the default extraction; a turn is then a message, episodes and facts counted."""
    if default:
        bodies = [chat_interaction(f"long-user-{i % 20:03d}", text, texts[(i + 1) % len(texts)])
                  for i, text in enumerate(texts)]
    else:
        bodies = [interaction(f"long-user-{i % 20:03d}", text) for i, text in enumerate(texts)]
    with stack.client() as client:
        warm_up_writes(client)
        with stack.cpu_meter() as cpu:
            started_wall = time.time()
            job_ids = [enqueue(client, body) for body in bodies]
            views = wait_all(client, job_ids)
    failed = [v for v in views if v["status"] != "succeeded"]
    if failed:
        raise RuntimeError(f"{len(failed)} long-turn jobs failed, e.g. {failed[0]}")
    added = sum(int((v.get("result") or {}).get("added", 0)) for v in views)
    seconds = max(finished_at(v) for v in views) - started_wall
    alone = embedder_alone(stack.embedder, texts[:CEILING_TEXTS], in_parts)
    turns = 2 * len(texts) if default else added
    extra: dict[str, Any] = {}
    if default:
        results = [v.get("result") or {} for v in views]
        extra = {"turns": turns,
                 "episodes": sum(int(r.get("episodes", 0)) for r in results),
                 "facts": sum(int(r.get("facts", 0)) for r in results),
                 "topic_readings": topic_readings(stack, {b["user_id"] for b in bodies}),
                 "interactions_per_s": round(len(texts) / seconds, 2)}
    return {
        "interactions": len(texts),
        "memories_written": added,
        "message_chars_mean": chars_mean(texts),
        "share_over_2000_chars": round(float(np.mean([len(t) > 2000 for t in texts])), 3),
        "passages_mean": round(float(np.mean([len(split_parts(t)) if in_parts else 1
                                              for t in texts])), 2),
        "seconds": round(seconds, 3),
        "turns_per_s": round(turns / seconds, 2),
        **extra,
        "embedder_alone_per_s": alone,
        "worker_concurrency": stack.worker_concurrency,
        "cpu": cpu.result,
        "timed": "first enqueue until the last job was marked succeeded",
    }


def topic_readings(stack: Stack, users: set[str]) -> int:
    """How many of the users' facts were also embedded by their topics (one more embedding
    each: `memoryd.extraction.topics`)."""
    count = 0
    with stack.client() as client:
        for user in sorted(users):
            count += sum(topic_reading(m["content"]) is not None
                         for m in stored_memories(client, user, kind="fact"))
    return count


def run_long_phase(opts: Options, locomo: Locomo, workdir: Path) -> dict[str, Any]:
    texts = long_texts(locomo.turns, opts.long_n)
    threads = int(Settings.model_fields["worker_concurrency"].default)
    out: dict[str, Any] = {}
    for name, value in SETTINGS.items():
        env = {**opts.stack_env, "MEMORYD_LONG_MEMORY_PARTS": value}
        with Stack(f"long-{name}", workdir / f"long-{name}", workdir, opts.embedder,
                   worker_concurrency=threads, extra_env=env) as stack:
            log(f"long turns ({name}): {len(texts)} interactions, one worker, "
                f"{threads} threads")
            out[name] = run_long_ingest(stack, texts, value == "true", name == "default")
    return out

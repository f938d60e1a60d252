"""Worst-case CPU time of the per-text passes and of the embedder on one message of the
maximum size.

    python -m ops.bench.hostile [--repeats 5] [--embed-repeats 2] [--no-embedder]
                                [--out bench-results/hostile.json]

Every shape of `ops/bench/hostile_corpus.py` (plus ordinary English and Chinese, for scale)
is filled to `max_message_bytes` of UTF-8 and put through each pass in this process; a pass's
time on a shape is the least CPU time (`time.process_time`) of `--repeats` runs, so another
process's time slice does not count. Printed: per pass, the worst shape and its time; then
the worst total of redaction + rules + keyword vector over one message, against the goal of
20 ms. The JSON report has every shape's times.

The embedder (the bundled e5, uncached, on its lanes in this process, so its threads' CPU
counts) is measured on the same messages along both paths: `query_embedding` is what a
search has the model do with the message as its query (the whole, and its current turn
when it has several lines, each bounded to its last window), `memory_embedding` what a
write has it do with the message as a memory (its passages, within the memory's token
budget, shared/embeddings/parts.py). Both include counting tokens. Their goal: the worst
shape at most 3x the ordinary English message.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from memoryd.embeddings.base import Embedder
from memoryd.embeddings.local import E5Embedder
from memoryd.embeddings.parts import embed_memories
from memoryd.extraction.forget_intent import has_forget_intent
from memoryd.extraction.redaction import found_secrets, redact
from memoryd.extraction.rules import extract_rules
from memoryd.platform.host import machine_info
from memoryd.platform.settings import Settings
from memoryd.retrieval.context_tokens import estimate_tokens
from memoryd.retrieval.keywords import keyword_vector, query_keyword_vector
from memoryd.retrieval.query_text import read_query
from memoryd.retrieval.speaker_cues import about_own_words
from ops.bench.hostile_corpus import fill, hostile_corpus
from ops.bench.report import write_report
from ops.stack import ROOT, log

DEFAULT_OUT = ROOT / "bench-results" / "hostile.json"
GOAL_MS = 20.0
# The three passes every stored message or memory goes through; the goal is their sum.
GOAL_PASSES = ("redaction", "rules", "keyword_vector")
# The model's work on the worst shape, against that on an ordinary English message.
EMBED_GOAL_RATIO = 3.0
EMBED_PASSES = ("query_embedding", "memory_embedding")
EMBED_BASELINE = "ordinary-english"

ORDINARY = {
    "ordinary-english": ("", "I moved to Lisbon last spring and I work at a small design "
                         "studio. My sister visits in May; we like long walks by the river. "),
    "ordinary-chinese": ("", "我去年搬到了杭州，在一家设计公司上班。周末喜欢和朋友去西湖边散步，"
                         "偶尔也会去爬山。"),
}


def _query(text: str) -> object:
    read = read_query(text)
    return query_keyword_vector(read.full, read.current if read.is_excerpt else None)


PASSES: dict[str, Callable[[str], object]] = {
    "redaction": redact,
    "rules": lambda text: extract_rules([text]),
    "keyword_vector": keyword_vector,
    "found_secrets": found_secrets,
    "query_reader": _query,
    "forget_intent": has_forget_intent,
    "speaker_cues": about_own_words,
    "token_estimate": estimate_tokens,
}


def embed_passes(embedder: Embedder) -> dict[str, Callable[[str], object]]:
    def query(text: str) -> object:
        # As shared/memories/reads.py `query_vector`: the whole query, then its current turn.
        read = read_query(text)
        vector = embedder.embed_query(text)
        return vector if not read.is_excerpt else embedder.embed_query(read.current)

    return {"query_embedding": query,
            "memory_embedding": lambda text: embed_memories(embedder, [text])}


def cpu_ms(run: Callable[[str], object], text: str, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        run(text)
        best = min(best, time.process_time() - start)
    return best * 1000


def measure(max_bytes: int, repeats: int, embedder: Embedder | None = None,
            embed_repeats: int = 2, embed_shapes: Sequence[str] = ()
            ) -> dict[str, dict[str, float]]:
    """shape → pass → CPU ms, plus "total" (the goal's passes summed); the embedder's
    passes on `embed_shapes` (all when empty) and always on the ordinary English one."""
    texts = hostile_corpus(max_bytes)
    texts.update({name: fill(prefix, unit, max_bytes) for name, (prefix, unit)
                  in ORDINARY.items()})
    keyword_vector("我喜欢吃辣")  # the segmenter loads its dictionary on the first Chinese text
    embedding = embed_passes(embedder) if embedder is not None else {}
    if embedder is not None:
        embedder.warm_up()
        embed_memories(embedder, [texts[EMBED_BASELINE]])
    out: dict[str, dict[str, float]] = {}
    for shape, text in texts.items():
        times = {name: round(cpu_ms(run, text, repeats), 2) for name, run in PASSES.items()}
        times["total"] = round(sum(times[name] for name in GOAL_PASSES), 2)
        if not embed_shapes or shape in embed_shapes or shape == EMBED_BASELINE:
            times.update({name: round(cpu_ms(run, text, embed_repeats), 1)
                          for name, run in embedding.items()})
        out[shape] = times
        log(f"[hostile] {shape}: {times}")
    return out


def summary(times: dict[str, dict[str, float]]) -> list[tuple[str, str, float]]:
    """(pass, worst shape, its ms) for every pass measured and the total."""
    rows = []
    measured = [name for name in (*PASSES, "total", *EMBED_PASSES)
                if any(name in row for row in times.values())]
    for name in measured:
        shape = max((s for s in times if name in times[s]), key=lambda s: times[s][name])
        rows.append((name, shape, times[shape][name]))
    return rows


def render(rows: list[tuple[str, str, float]], max_bytes: int, goal_ms: float = GOAL_MS,
           baseline: dict[str, float] | None = None) -> str:
    """The printed table, a markdown one (docs/benchmarks.md shows it from the report);
    `baseline`: the embedder passes' times on the ordinary English message."""
    lines = [f"worst-case CPU per message of {max_bytes} bytes (least of the repeats)",
             "| pass | worst shape | CPU ms |", "|---|---|---|"]
    lines += [f"| {name} | {shape} | {ms:.1f} |" for name, shape, ms in rows]
    total = next(ms for name, _, ms in rows if name == "total")
    verdict = (f"redaction + rules + keyword vector: {total:.1f} ms "
               f"(goal ≤ {goal_ms:g} ms: {'met' if total <= goal_ms else 'NOT met'})")
    for name, shape, ms in rows:
        if baseline and name in EMBED_PASSES and baseline.get(name):
            ratio = ms / baseline[name]
            met = "met" if ratio <= EMBED_GOAL_RATIO else "NOT met"
            verdict += (f"; {name}: worst {ms:.0f} ms ({shape}) = {ratio:.2f}x the ordinary "
                        f"English message's {baseline[name]:.0f} ms (goal ≤ "
                        f"{EMBED_GOAL_RATIO:g}x: {met})")
    lines.append(verdict)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ops.bench.hostile",
        description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=5, help="runs per pass and shape")
    parser.add_argument("--embed-repeats", type=int, default=2,
                        help="runs per embedder pass and shape")
    parser.add_argument("--embed-shapes", default="",
                        help="comma-separated shapes the embedder is timed on (default: all; "
                             "the ordinary English one always)")
    parser.add_argument("--no-embedder", action="store_true",
                        help="time the text passes only")
    parser.add_argument("--max-bytes", type=int, default=None,
                        help="message size (default: the max_message_bytes setting)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON report path")
    args = parser.parse_args(argv)
    settings = Settings()  # the bench is its process's composition root
    max_bytes = args.max_bytes or settings.max_message_bytes
    embedder = None if args.no_embedder else E5Embedder(settings=settings)
    embed_shapes = [s.strip() for s in args.embed_shapes.split(",") if s.strip()]
    times = measure(max_bytes, max(1, args.repeats), embedder, max(1, args.embed_repeats),
                    embed_shapes)
    rows = summary(times)
    baseline = {name: times[EMBED_BASELINE][name] for name in EMBED_PASSES
                if name in times[EMBED_BASELINE]}
    report: dict[str, Any] = {
        "max_message_bytes": max_bytes, "repeats": args.repeats, "goal_ms": GOAL_MS,
        "embed_repeats": args.embed_repeats, "embed_goal_ratio": EMBED_GOAL_RATIO,
        "embed_shapes": embed_shapes or "all",
        "embed_baseline": {"shape": EMBED_BASELINE, "cpu_ms": baseline},
        "goal_passes": list(GOAL_PASSES), "machine": machine_info(),
        "worst": {name: {"shape": shape, "cpu_ms": ms} for name, shape, ms in rows},
        "shapes": times,
    }
    write_report(args.out, report)
    print(render(rows, max_bytes, baseline=baseline))
    log(f"[hostile] report: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

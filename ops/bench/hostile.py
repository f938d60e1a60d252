"""Worst-case CPU time of the per-text passes on one message of the maximum size.

    python -m ops.bench.hostile [--repeats 5] [--out bench-results/hostile.json]

Every shape of `ops/bench/hostile_corpus.py` (plus ordinary English and Chinese, for scale)
is filled to `max_message_bytes` of UTF-8 and put through each pass in this process; a pass's
time on a shape is the least CPU time (`time.process_time`) of `--repeats` runs, so another
process's time slice does not count. Printed: per pass, the worst shape and its time; then
the worst total of redaction + rules + keyword vector over one message, against the goal of
20 ms. The JSON report has every shape's times.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ops.bench.hostile_corpus import fill, hostile_corpus
from ops.bench.report import machine_info, write_report
from ops.stack import ROOT, log
from shared.extraction.forget_intent import has_forget_intent
from shared.extraction.redaction import found_secrets, redact
from shared.extraction.rules import extract_rules
from shared.platform.settings import Settings
from shared.retrieval.context_tokens import estimate_tokens
from shared.retrieval.keywords import keyword_vector, query_keyword_vector
from shared.retrieval.query_text import read_query

DEFAULT_OUT = ROOT / "bench-results" / "hostile.json"
GOAL_MS = 20.0
# The three passes every stored message or memory goes through; the goal is their sum.
GOAL_PASSES = ("redaction", "rules", "keyword_vector")

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
    "token_estimate": estimate_tokens,
}


def cpu_ms(run: Callable[[str], object], text: str, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        run(text)
        best = min(best, time.process_time() - start)
    return best * 1000


def measure(max_bytes: int, repeats: int) -> dict[str, dict[str, float]]:
    """shape → pass → CPU ms, plus "total" (the goal's passes summed)."""
    texts = hostile_corpus(max_bytes)
    texts.update({name: fill(prefix, unit, max_bytes) for name, (prefix, unit)
                  in ORDINARY.items()})
    keyword_vector("我喜欢吃辣")  # the segmenter loads its dictionary on the first Chinese text
    out: dict[str, dict[str, float]] = {}
    for shape, text in texts.items():
        times = {name: round(cpu_ms(run, text, repeats), 2) for name, run in PASSES.items()}
        times["total"] = round(sum(times[name] for name in GOAL_PASSES), 2)
        out[shape] = times
        log(f"[hostile] {shape}: {times}")
    return out


def summary(times: dict[str, dict[str, float]]) -> list[tuple[str, str, float]]:
    """(pass, worst shape, its ms) for every pass and the total."""
    rows = []
    for name in (*PASSES, "total"):
        shape = max(times, key=lambda s: times[s][name])
        rows.append((name, shape, times[shape][name]))
    return rows


def render(rows: list[tuple[str, str, float]], max_bytes: int, goal_ms: float = GOAL_MS) -> str:
    """The printed table, a markdown one (docs/benchmarks.md shows it from the report)."""
    lines = [f"worst-case CPU per message of {max_bytes} bytes (least of the repeats)",
             "| pass | worst shape | CPU ms |", "|---|---|---|"]
    lines += [f"| {name} | {shape} | {ms:.1f} |" for name, shape, ms in rows]
    total = rows[-1][2]
    lines.append(f"redaction + rules + keyword vector: {total:.1f} ms "
                 f"(goal ≤ {goal_ms:g} ms: {'met' if total <= goal_ms else 'NOT met'})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ops.bench.hostile",
        description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=5, help="runs per pass and shape")
    parser.add_argument("--max-bytes", type=int, default=None,
                        help="message size (default: the max_message_bytes setting)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON report path")
    args = parser.parse_args(argv)
    max_bytes = args.max_bytes or Settings().max_message_bytes
    times = measure(max_bytes, max(1, args.repeats))
    rows = summary(times)
    report: dict[str, Any] = {
        "max_message_bytes": max_bytes, "repeats": args.repeats, "goal_ms": GOAL_MS,
        "goal_passes": list(GOAL_PASSES), "machine": machine_info(),
        "worst": {name: {"shape": shape, "cpu_ms": ms} for name, shape, ms in rows},
        "shapes": times,
    }
    write_report(args.out, report)
    print(render(rows, max_bytes))
    log(f"[hostile] report: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

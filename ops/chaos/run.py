"""Run every fault scenario against live stacks and print what survived.

    python -m ops.chaos [--quick] [--only NAME,...] [--work-dir DIR] [--keep]

Each scenario starts what it needs on 127.0.0.1 and free ports (Redis, `memoryd up`, or
`memoryd serve` + `memoryd worker`, a fake hosted embedding API, a fake chat model, a
Qdrant REST stand-in), injects its fault, waits for every job, counts the memories, and
stops everything it started. The table: interactions sent, distinct memories expected,
found, duplicates, lost, and the longest time from the end of a fault to the affected jobs
being done.
Exit status 1 if any scenario lost or duplicated anything, or failed outright.

The same scenario functions run at a small size in tests/faults/ (CI); this command runs
them at full size (1,000 interactions for the concurrent-workers scenario).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from memoryd.platform import failpoints
from ops.chaos.common import Row
from ops.chaos.embedded import (
    concurrent_workers,
    embedder_unreachable,
    redis_away_at,
    redis_restarted,
    stack_killed_and_restarted,
)
from ops.chaos.erasure import forgotten_text_erased
from ops.chaos.hostile import hostile_tenant
from ops.chaos.llm import worker_killed_in_llm_call
from ops.chaos.server import (
    concurrent_worker_processes,
    store_unreachable,
    worker_killed_in_slow_embedding,
    worker_killed_in_store_write,
)
from ops.stack import log

Scenario = Callable[[Path], Row]


def scenarios(quick: bool) -> dict[str, Scenario]:
    def size(full: int, small: int) -> int:
        return small if quick else full

    return {
        "worker-store-write": lambda w: worker_killed_in_store_write(
            w, size(100, 6), kills=size(5, 2)),
        "worker-slow-remote": lambda w: worker_killed_in_slow_embedding(
            w, size(100, 6), kills=size(5, 2)),
        "worker-llm-call": lambda w: worker_killed_in_llm_call(
            w, size(100, 6), kills=size(6, 2)),
        "stack-kill": lambda w: stack_killed_and_restarted(w, size(200, 10)),
        "redis-restart": lambda w: redis_restarted(w, size(500, 30)),
        "redis-away-taken": lambda w: redis_away_at(w, failpoints.BROKER_TAKEN, size(50, 4)),
        "redis-away-finish": lambda w: redis_away_at(w, failpoints.JOB_FINISH, size(50, 4)),
        "store-down": lambda w: store_unreachable(w, size(200, 10), outage_s=size(10, 2)),
        "embedder-down": lambda w: embedder_unreachable(w, size(200, 10), outage_s=size(10, 2)),
        "concurrent": lambda w: concurrent_workers(w, size(1000, 80), threads=8),
        "concurrent-processes": lambda w: concurrent_worker_processes(
            w, size(1000, 80), processes=8),
        "hostile-tenant": lambda w: hostile_tenant(
            w, messages=size(64, 8), shapes=None if not quick else 8,
            searches=size(400, 160), writes=size(20, 6), rounds=size(4, 2)),

        # Forgotten markers gone from every byte on disk; the full run waits for the
        # periodic compaction (bound 5 s) instead of compacting inside the forget.
        "erasure": lambda w: forgotten_text_erased(w, size(200, 6), bound_s=size(5, 0)),
    }


def table(rows: Sequence[Row]) -> str:
    head = ("scenario", "interactions sent", "memories expected", "found", "duplicates",
            "lost", "max recovery")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        recovery = "–" if r.recovery_s is None else f"{r.recovery_s:.1f} s"
        lines.append(f"| {r.scenario} | {r.sent:,} | {r.expected:,} | {r.found:,} | "
                     f"{r.duplicates} | {r.lost} | {recovery} |")
    notes = [f"- {r.scenario}: {'; '.join(r.notes)}" for r in rows if r.notes]
    return "\n".join(lines + ([""] + notes if notes else []))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ops.chaos", description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small sizes (a minute or two)")
    parser.add_argument("--only", default="", help="comma-separated scenario names")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="where data and logs go (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)

    chosen = scenarios(args.quick)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in chosen]
        if unknown:
            parser.error(f"unknown scenarios {unknown}; known: {', '.join(chosen)}")
        chosen = {n: chosen[n] for n in names}

    work = args.work_dir or Path(tempfile.mkdtemp(prefix="memoryd-chaos-"))
    rows: list[Row] = []
    failed = False
    try:
        for name, run in chosen.items():
            log(f"[chaos] {name} …")
            started = time.monotonic()
            try:
                row = run(work / name)
            except Exception as exc:
                log(traceback.format_exc())
                row = Row(name, 0, 0, 0, 0, 0, None, [f"FAILED: {exc}"])
                failed = True
            failed = failed or not row.ok
            log(f"[chaos] {name}: {row} ({time.monotonic() - started:.0f}s)")
            rows.append(row)
    finally:
        if args.keep or failed:
            log(f"[chaos] data and logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(table(rows))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

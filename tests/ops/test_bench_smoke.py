"""`python -m ops.bench` end to end at a tiny size: real stack subprocesses, real HTTP, real report.

The full-size figures take minutes; this only proves the command runs and reports every
section with plausible numbers, so a broken bench is noticed before someone needs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.tiny_locomo import write_tiny_locomo

ROOT = Path(__file__).resolve().parents[2]


def _positive(section: dict[str, Any], *keys: str) -> None:
    for key in keys:
        value: Any = section
        for part in key.split("."):
            value = value[part]
        assert isinstance(value, int | float) and value > 0, f"{key} = {value!r}"


def test_bench_runs_end_to_end_at_a_tiny_size(tmp_path: Path, bench_cache: Path) -> None:
    locomo = write_tiny_locomo(tmp_path / "locomo10.json")  # LoCoMo's shape, generated
    out = tmp_path / "bench.json"
    cmd = [
        sys.executable, "-m", "ops.bench",
        "--embedder", "e5-small", "--sizes", "200", "--per-user", "100",
        "--enqueue-n", "20", "--ingest-n", "20", "--search-n", "20", "--concurrent-n", "24",
        "--empty-n", "12", "--clients", "4", "--probe-n", "20", "--pool-limit", "150",
        "--long-n", "3", "--locomo", str(locomo), "--out", str(out),
        "--cache-dir", str(bench_cache), "--work-dir", str(tmp_path / "work"),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    env["PYTHONPATH"] = str(ROOT)  # `-m ops.bench` from any directory: this checkout
    proc = subprocess.run(
        cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    assert "enqueue: POST /v1/interactions" in proc.stdout  # the table was printed

    report: dict[str, Any] = json.loads(out.read_text())
    assert "error" not in report
    meta = report["meta"]
    assert meta["embedder"] == "e5-small" and meta["date"]
    _positive(meta, "machine.nproc")
    assert meta["machine"]["cpu_model"]

    enqueue = report["enqueue"]
    assert enqueue["requests"] == 20 and enqueue["jobs_failed"] == 0
    _positive(enqueue, "latency.p50_ms", "latency.p99_ms", "latency.mean_ms")

    ingest = report["ingest"]
    assert ingest["interactions"] == 20 and ingest["memories_written"] == 20
    _positive(ingest, "seconds", "memories_per_s", "embedder_alone_per_s", "share_of_embedder")
    assert ingest["worker_concurrency"] == 1
    shipped = report["ingest_default_threads"]
    assert shipped["memories_written"] == 20 and shipped["worker_concurrency"] == 4
    _positive(shipped, "seconds", "memories_per_s")

    search = report["search"]
    _positive(search, "embedder_bound.single_query.mean_ms",
              "embedder_bound.parallel_queries_per_s", "embedder_bound.bound_queries_per_s")
    [size] = search["sizes"]
    assert (size["memories"], size["users"]) == (200, 2)
    assert size["fill"]["points"] == 200 and "bulk" in size["fill"]["method"]
    for run, count in (("one_client", 20), ("concurrent", 24)):
        assert size[run]["searches"] == count and size[run]["errors"] == 0, size[run]
        assert size[run]["results_mean"] == 10  # top_k 10 out of 100 memories per user
        _positive(size[run], "latency.p50_ms", "latency.p99_ms", "latency.mean_ms")
    _positive(size, "concurrent.throughput_req_per_s", "concurrent.share_of_embedder_bound",
              "concurrent.embedder_bound_beside.bound_queries_per_s")
    concurrent = size["concurrent"]
    assert concurrent["share_of_embedder_bound"] == round(
        concurrent["throughput_req_per_s"]
        / concurrent["embedder_bound_beside"]["bound_queries_per_s"], 3)

    # The same clients for users that have no memories: every search answered, none found.
    empty = size["concurrent_no_memories"]
    assert empty["searches"] == 12 and empty["errors"] == 0 and empty["results_mean"] == 0
    assert empty["clients"] == 4
    _positive(empty, "throughput_req_per_s", "share_of_embedder_bound", "latency.p99_ms")
    assert "users with no memories" in proc.stdout

    _positive(report, "gateway_rss.vmhwm_mib")
    assert report["gateway_rss"]["after_search_at"] == 200
    # Long turns: in passages and whole, every job written, each turn past a passage.
    for setting in ("parts", "whole"):
        long = report["long_ingest"][setting]
        assert long["interactions"] == long["memories_written"] == 3, long
        assert long["message_chars_mean"] > 500 and long["turns_per_s"] > 0
    assert report["long_ingest"]["parts"]["passages_mean"] > 1
    assert report["long_ingest"]["whole"]["passages_mean"] == 1
    assert "long turns (" in proc.stdout
    # As a chat server posts them: a user and an assistant turn each, both kept, and what a
    # turn costs the model printed beside its rate.
    default = report["long_ingest"]["default"]
    assert default["turns"] == default["episodes"] == 6 and default["turns_per_s"] > 0
    assert "what a turn costs: its episode's passages and the facts drawn from it" in proc.stdout
    assert 0 <= default["topic_readings"] <= default["facts"]
    assert set(report["goals"]) == {"enqueue_p50_ms", "ingest_memories_per_s",
                                    "ingest_default_threads_memories_per_s",
                                    "long_turns_per_s", "long_default_turns_per_s"}
    # The temporary data dirs are removed; the stacks (and their Redis) were stopped.
    assert not any((tmp_path / "work").iterdir())


@pytest.mark.parametrize("module", ["ops.bench", "ops.bench.ab", "ops.bench.candidates"])
def test_a_bench_without_its_data_says_where_it_is_expected(tmp_path: Path,
                                                            module: str) -> None:
    """LoCoMo does not ship with the repository: a bench run without it ends at once with
    the path it looked at and where the data comes from, not a traceback."""
    missing = tmp_path / "nowhere" / "locomo10.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-m", module, "--locomo", str(missing),
                           "--work-dir", str(tmp_path / "work")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"LoCoMo data not found at {missing}" in proc.stderr
    assert "--locomo PATH" in proc.stderr and "snap-research/LoCoMo" in proc.stderr
    assert "Traceback" not in proc.stderr

"""`python -m ops.bench --peer mem0`: the peer gets memoryd's own texts, its figures are put
beside memoryd's as ratios (printed, and on docs/benchmarks.md), and a peer that is not
installed costs one line, not the run."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ops.bench.common import PeerOptions
from ops.bench.docs import generated_blocks, render_document
from ops.bench.fill import Pool, user_points
from ops.bench.peer import peer_rows, probe_peer, ratio, render_peer, user_contents
from ops.bench.run import parse_args
from tests.support.tiny_locomo import write_tiny_locomo

ROOT = Path(__file__).resolve().parents[2]
PEER_SOURCE = "bench-results/bench.json#peer"
MEM0_HERE = importlib.util.find_spec("mem0") is not None


def test_the_peer_gets_the_texts_memoryds_bulk_fill_writes(tmp_path: Path) -> None:
    texts = [f"Speaker {i}: a line about the weekend, number {i}" for i in range(40)]
    dim = 8
    vectors = np.random.default_rng(3).normal(size=(len(texts), dim)).astype(np.float32)
    pool = Pool(texts, vectors, tmp_path / "pool.npy", cached=True, embed_seconds=0.0)
    # Three users in a row from one generator, as bulk_fill draws them; the third has more
    # memories than the pool has texts, so its picks repeat.
    memoryd_rng, peer_rng = np.random.default_rng(11), np.random.default_rng(11)
    for user, per_user in (("u0", 12), ("u1", 12), ("u2", 50)):
        points = user_points(user, pool, per_user, "e5-small", memoryd_rng)
        contents, picks = user_contents(texts, per_user, dim, peer_rng)
        assert contents == [p.payload["content"] for p in points]
        assert [texts[pick] for pick in picks] == [c.rsplit(" (#", 1)[0] for c in contents]


def _report() -> dict[str, Any]:
    machine = {"nproc": 2, "cpu_model": "Fixture CPU", "mem_total_gb": 8.0,
               "python": "3.11.7", "platform": "Linux-fixture"}
    cpu = {"peer_cores": 1.5, "system_busy_cores": 1.9, "other_cores": 0.4}

    def lat(p50: float, p99: float) -> dict[str, float]:
        return {"n": 10, "p50_ms": p50, "p99_ms": p99, "mean_ms": p50, "max_ms": p99}

    return {
        "meta": {"date": "2026-01-02T03:04:05+00:00", "embedder": "e5-small",
                 "machine": machine,
                 "command": ["python", "-m", "ops.bench", "--peer", "mem0", "--sizes", "1000"]},
        "enqueue": {"requests": 20, "latency": lat(2.0, 4.0), "cpu": {"other_cores": 0.0}},
        "search": {
            "embedder_bound": {"single_query": lat(5.0, 9.0), "parallel_queries_per_s": 300.0,
                               "bound_queries_per_s": 300.0, "cpu": {"other_cores": 0.0}},
            "sizes": [
                {"memories": 1000, "users": 1, "memories_per_user": 1000,
                 "fill": {"seconds": 1.0, "points_per_s": 1000.0},
                 "one_client": {"latency": lat(10.0, 20.0), "server_took": lat(8.0, 15.0)},
                 "concurrent": {"throughput_req_per_s": 100.0, "clients": 8,
                                "share_of_embedder_bound": 0.333, "latency": lat(70.0, 90.0)},
                 "stack_memory": {"vmhwm_mib": 400.0}},
            ]},
        "peer": {
            "name": "mem0", "python": "/venv/bin/python",
            "versions": {"mem0ai": "2.2.1"},
            "setup": {"fill": "fixture fill", "search": "fixture search"},
            "add": {"requests": 20, "latency": lat(30.0, 50.0), "cpu": cpu},
            "sizes": [
                {"memories": 1000, "users": 1,
                 "fill": {"points": 1000, "seconds": 5.0, "points_per_s": 200.0,
                          "pool_from_cache": True, "pool_embed_seconds": 0.0},
                 "one_client": {"searches": 10, "latency": lat(150.0, 300.0), "cpu": cpu},
                 "concurrent": {"searches": 16, "threads": 8, "throughput_req_per_s": 8.0,
                                "latency": lat(900.0, 1200.0), "cpu": cpu},
                 "memory": {"vmhwm_mib": 900.0, "vmrss_mib": 880.0}},
                # A size memoryd did not run: its figures and ratios are "-".
                {"memories": 2000, "users": 2,
                 "fill": {"points": 2000, "seconds": 9.0, "points_per_s": 222.0,
                          "pool_from_cache": False, "pool_embed_seconds": 12.5},
                 "one_client": {"searches": 10, "latency": lat(250.0, 400.0), "cpu": cpu},
                 "concurrent": {"searches": 16, "threads": 8, "throughput_req_per_s": 5.0,
                                "latency": lat(1500.0, 2000.0), "cpu": cpu},
                 "memory": {"vmhwm_mib": 950.0, "vmrss_mib": 930.0}},
            ],
        },
    }


def test_ratios_put_the_peers_figures_over_memoryds() -> None:
    assert ratio(2.0, 30.0) == "15×"
    assert ratio(10.0, 15.0) == "1.50×"
    assert ratio(100.0, 8.0) == "0.08×"
    assert ratio(None, 8.0) == "-" and ratio(0.0, 8.0) == "-"

    rows = {row[0]: row[1:] for row in peer_rows(_report())}
    assert rows["write: memoryd enqueue vs mem0 add (infer=False), p50"] == (
        "2.0", "30.0", "ms", "15×", "lower")
    assert rows["write: memoryd enqueue vs mem0 add (infer=False), p99"] == (
        "4.0", "50.0", "ms", "12×", "lower")
    assert rows["search 1,000 mem, 1 client: p50"] == ("10.0", "150.0", "ms", "15×", "lower")
    assert rows["search 1,000 mem, 1 client: p99"] == ("20.0", "300.0", "ms", "15×", "lower")
    assert rows["search 1,000 mem, 8 clients: throughput"] == (
        "100.0", "8.0", "req/s", "0.08×", "higher")
    assert rows["peak RSS (VmHWM) after search at 1,000 mem"] == (
        "400.0", "900.0", "MiB", "2.25×", "lower")
    assert rows["search 2,000 mem, 1 client: p50"] == ("-", "250.0", "ms", "-", "lower")

    printed = render_peer(_report())
    assert printed.splitlines()[0] == (
        "memoryd beside mem0 (same texts, users and questions)")
    assert "mem0 / memoryd" in printed
    assert "fill 9.0 s (222 points/s, pool embedded in 12.5 s)" in printed
    assert "other processes took 0.40 cores" in printed


def test_the_page_shows_the_peer_and_keeps_it_when_a_report_has_none(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "bench.json").write_text(json.dumps(_report()), encoding="utf-8")
    page = render_document(results)
    block = dict(generated_blocks(page))[PEER_SOURCE]
    assert "Command: `python -m ops.bench --peer mem0 --sizes 1000`" in block
    assert "| search 1,000 mem, 8 clients: throughput | 100.0 | 8.0 | req/s | 0.08× | higher |" \
        in block
    assert "| measure | memoryd | mem0 | unit | mem0 / memoryd | better |" in block

    # Rerun without --peer: memoryd's block is the new report's, the peer's stays as it was.
    rerun = {k: v for k, v in _report().items() if k != "peer"}
    rerun["enqueue"]["latency"]["p50_ms"] = 7.77
    (results / "bench.json").write_text(json.dumps(rerun), encoding="utf-8")
    again = dict(generated_blocks(render_document(results, page)))
    assert again[PEER_SOURCE] == block
    assert "| 7.8 | ms |" in again["bench-results/bench.json"]
    # With no page to keep it from, the block says how to make it.
    assert dict(generated_blocks(render_document(results)))[PEER_SOURCE].startswith(
        "No report yet: `python -m ops.bench --peer mem0")


def test_peer_options_are_checked() -> None:
    opts = parse_args(["--peer", "mem0", "--peer-python", "/venv/bin/python",
                       "--peer-add-n", "7"])
    assert opts.peer == PeerOptions(name="mem0", python=Path("/venv/bin/python"), add_n=7,
                                    search_n=100, concurrent_n=240)
    assert parse_args([]).peer is None
    with pytest.raises(SystemExit):
        parse_args(["--peer", "mem0", "--peer-search-n", "0"])
    with pytest.raises(SystemExit):
        parse_args(["--peer", "other"])


@pytest.mark.skipif(MEM0_HERE, reason="mem0 is importable here: nothing to report missing")
def test_a_peer_not_installed_is_one_line(tmp_path: Path, capfd: pytest.CaptureFixture[str],
                                          ) -> None:
    peer = PeerOptions(name="mem0", python=Path(sys.executable), add_n=1, search_n=1,
                       concurrent_n=1)
    assert probe_peer(peer, tmp_path) is None
    out, err = capfd.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("--peer mem0: not installed for ")
    assert "pip install -e '.[peer]'" in lines[0] and "--peer-python" in lines[0]


@pytest.mark.skipif(MEM0_HERE, reason="mem0 is importable here: nothing to report missing")
def test_the_bench_runs_without_a_peer_that_is_not_installed(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    locomo = write_tiny_locomo(tmp_path / "locomo10.json")  # LoCoMo's shape, generated
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "ops.bench", "--peer", "mem0", "--phases", "enqueue",
         "--enqueue-n", "3", "--locomo", str(locomo), "--out", str(out),
         "--work-dir", str(tmp_path / "work")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = [line for line in done.stderr.splitlines() if line.startswith("--peer mem0")]
    assert len(said) == 1 and "not installed" in said[0]
    assert "enqueue: POST /v1/interactions x3" in done.stdout
    assert "memoryd beside mem0" not in done.stdout
    assert "peer" not in json.loads(out.read_text(encoding="utf-8"))

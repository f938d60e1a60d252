"""`python -m ops.bench --phases extract` end to end at a tiny size: the fake LLM, real processes
(server-mode workers on the Qdrant REST stand-in) and, once, the embedded stack's threads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.tiny_locomo import write_tiny_locomo

ROOT = Path(__file__).resolve().parents[2]


def run_bench(tmp_path: Path, *extra: str) -> tuple[str, dict[str, Any]]:
    locomo = write_tiny_locomo(tmp_path / "locomo10.json")  # LoCoMo's shape, generated
    out = tmp_path / "bench.json"
    cmd = [
        sys.executable, "-m", "ops.bench", "--phases", "extract",
        "--extract-latency-ms", "100", "--extract-jobs", "4", "--extract-enqueue-n", "10",
        "--extract-raw-n", "2", *extra,
        "--locomo", str(locomo), "--out", str(out), "--work-dir", str(tmp_path / "work"),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    env["PYTHONPATH"] = str(ROOT)  # `-m ops.bench` from any directory: this checkout
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=280)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    assert not any((tmp_path / "work").iterdir())
    return proc.stdout, json.loads(out.read_text())["extract"]


def check_runs(section: dict[str, Any], workers: list[int]) -> None:
    assert section["llm_latency_ms"] == 100
    assert [r["llm_workers"] for r in section["runs"]] == workers
    for run in section["runs"]:
        assert run["jobs_failed"] == 0 and run["memories_added"] == 4, run
        assert run["jobs_per_s"] > 0
    saturated = section["saturated"]
    assert saturated["llm_workers"] == max(workers)
    assert saturated["enqueue_saturated"]["n"] == 10 and saturated["raw_ingest_idle"]["n"] == 2
    assert saturated["enqueue_saturated"]["p50_ms"] > 0


def test_extract_phase_with_worker_processes(tmp_path: Path) -> None:
    stdout, section = run_bench(tmp_path, "--extract-workers", "1,2")
    assert "llm extraction, 2 worker process(es)" in stdout
    assert "Qdrant stand-in" in stdout
    assert section["mode"] == "processes"
    check_runs(section, [1, 2])
    cpu = section["runs"][-1]["cpu"]
    # Every part was found and metered: the workers and the stand-in did the work.
    assert cpu["llm_workers_cores"] > 0 and cpu["facade_cores"] > 0, cpu


def test_extract_phase_with_embedded_threads(tmp_path: Path) -> None:
    stdout, section = run_bench(tmp_path, "--extract-workers", "2", "--extract-mode",
                                "threads")
    assert "llm extraction, 2 worker thread(s)" in stdout
    assert section["mode"] == "threads"
    check_runs(section, [2])

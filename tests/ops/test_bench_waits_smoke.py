"""`python -m ops.bench.waits` at a tiny size: it runs, prints both phases and the ratio, and its
JSON report says every wait was pending while the searches ran (no timing is asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_waits_prints_idle_and_loaded_search_latency(tmp_path: Path) -> None:
    out = tmp_path / "waits.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    proc = subprocess.run(
        [sys.executable, "-m", "ops.bench.waits", "--waits", "4", "--wait-s", "8",
         "--searches", "10", "--rounds", "2", "--memories", "2", "--work-dir", str(tmp_path),
         "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    rows = {line.split()[0]: line for line in proc.stdout.splitlines() if line.strip()}
    assert "idle" in rows and "4" in rows and "p99" in rows
    report = json.loads(out.read_text())
    assert report["idle"]["n"] == report["loaded"]["n"] == 10
    assert report["jobs_created"] == 4 and report["waits_pending_after_searches"] == 4
    assert sum(report["wait_answers"].values()) == 2 * 4  # two rounds of 4
    assert report["p99_ratio"] > 0

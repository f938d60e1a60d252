"""`python -m ops.bench.freshness` at a tiny size: it runs against a real `memoryd up`,
prints both modes' rows, and its JSON report says every fresh search found its write and
reported it applied (no timing is asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_freshness_prints_enqueue_to_searchable_latency(tmp_path: Path) -> None:
    out = tmp_path / "freshness.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    proc = subprocess.run(
        [sys.executable, "-m", "ops.bench.freshness", "--n", "2", "--work-dir", str(tmp_path),
         "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    rows = [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]
    assert rows.count("raw") == 5 and rows.count("rules") == 5  # five measures each
    report = json.loads(out.read_text())
    assert set(report["modes"]) == {"raw", "rules"}
    for mode in report["modes"].values():
        assert mode["polled"]["n"] == mode["fresh_search"]["n"] == 2
        assert mode["fresh_found"] == mode["fresh_applied"] == 2
        assert 0 < mode["polled"]["p50_ms"] <= mode["polled"]["max_ms"]

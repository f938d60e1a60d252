"""`python -m ops.bench.fairness` at a tiny size: it runs the real stack, prints its figures and
writes its report (no timing is asserted here; the figures are the bench's business)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_fairness_bench_reports_each_condition(tmp_path: Path) -> None:
    out = tmp_path / "fairness.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    proc = subprocess.run(
        [sys.executable, "-m", "ops.bench.fairness", "--backfill", "6", "--turns", "2",
         "--sentences", "3", "--saves", "2", "--unmarked", "2", "--out", str(out),
         "--work-dir", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=280,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    report = json.loads(out.read_text())
    assert report["idle"]["n"] == 2 and report["under_backfill"]["n"] == 2
    assert report["behind_unmarked"]["n"] == 2  # as many saves as --saves
    for section in ("idle", "under_backfill", "behind_unmarked"):
        assert report[section]["p50_ms"] > 0
    assert isinstance(report["goal_met"], bool)
    assert "x idle (goal: 2x)" in proc.stderr + proc.stdout

"""`python -m ops.bench.fairness` at a tiny size: it runs the real stack (embedded, or server
mode's processes), prints its figures and writes its report (no timing is asserted here; the
figures are the bench's business)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = ("idle", "under_backfill", "behind_unmarked")


def run_bench(tmp_path: Path, *args: str) -> tuple[dict[str, Any], str]:
    """The bench's report and its output; every save it timed succeeded, or it exits 1."""
    out = tmp_path / "fairness.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    proc = subprocess.run(
        [sys.executable, "-m", "ops.bench.fairness", "--turns", "2", "--saves", "2", *args,
         "--out", str(out), "--work-dir", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=280,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    report = json.loads(out.read_text())
    for section in SECTIONS:
        assert report[section]["n"] == 2  # as many saves as --saves, each one succeeded
        assert report[section]["p50_ms"] > 0
    assert isinstance(report["goal_met"], bool)
    assert isinstance(report["goal_unmarked_met"], bool)
    assert "x idle (goal: 2x)" in proc.stderr + proc.stdout
    assert list(tmp_path.iterdir()) == [out], "the bench's work dir is removed"
    return report, proc.stderr


def test_fairness_bench_reports_each_condition(tmp_path: Path) -> None:
    report, _ = run_bench(tmp_path, "--backfill", "6", "--sentences", "3", "--unmarked", "2")
    assert "mode" not in report and "store" not in report["idle"]  # the embedded shape
    assert report["behind_unmarked"]["unmarked"] == 2


def test_fairness_bench_in_server_mode(tmp_path: Path) -> None:
    """`--server 1`: a gateway, one memory worker and the bulk worker, on one Redis and the
    Qdrant stand-in; the report says so and what the stand-in did in each condition."""
    report, stderr = run_bench(tmp_path, "--server", "1", "--backfill", "3", "--sentences",
                               "2", "--unmarked", "3")
    assert report["mode"] == "server" and report["workers"] == 1
    assert report["backfill"] == 3 and report["behind_unmarked"]["unmarked"] == 3
    for section in SECTIONS:
        store = report[section]["store"]
        assert store["requests"] > 0  # the workers wrote through the shared Qdrant
        assert 0 <= store["busy_share"] <= 1
    assert "still without the model" not in stderr  # every pool process was warmed


def test_fairness_bench_refuses_counts_out_of_range(tmp_path: Path) -> None:
    """A count that leaves a condition without a save, or a worker count below zero, is
    refused before any stack starts: exit 2 naming the flag, no report written."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    for flag, value in (("--saves", "0"), ("--unmarked", "-1"), ("--server", "-1")):
        out = tmp_path / "fairness.json"
        proc = subprocess.run(
            [sys.executable, "-m", "ops.bench.fairness", flag, value, "--out", str(out)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, (flag, value, proc.stderr)
        assert flag in proc.stderr.splitlines()[-1], proc.stderr
        assert not out.exists()

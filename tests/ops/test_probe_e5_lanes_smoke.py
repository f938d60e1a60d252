"""`python -m ops.probes.e5_lanes` at its smallest: the real e5 through memoryd's lanes, each
figure present and positive (the figures themselves are the probe's business)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_lanes_probe_reports_its_figures(tmp_path: Path) -> None:
    out = tmp_path / "lanes.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    proc = subprocess.run(
        [sys.executable, "-m", "ops.probes.e5_lanes", "--turns", "1", "--repeats", "1",
         "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(out.read_text())
    assert proc.stdout.rstrip().endswith(out.read_text().rstrip())  # printed as written
    assert 0 < report["passage_tokens"] <= report["quick_tokens"]
    assert report["one_1_thread_ms"] > 0 and report["four_1_thread_ms"] > 0
    assert report["lone_turns_s"] > 0 and report["callers_turns_s"] > 0


def test_lanes_probe_refuses_a_count_below_one() -> None:
    proc = subprocess.run([sys.executable, "-m", "ops.probes.e5_lanes", "--turns", "0"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--turns" in proc.stderr

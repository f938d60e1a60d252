"""`ops/bench.py --phases extract` end to end at a tiny size: the fake LLM, real stacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCOMO = ROOT.parent / "shared" / "bench" / "locomo10.json"


def test_extract_phase_reports_throughput_and_saturated_latency(tmp_path: Path) -> None:
    assert LOCOMO.is_file(), f"LoCoMo bench data missing at {LOCOMO}"
    out = tmp_path / "bench.json"
    cmd = [
        sys.executable, str(ROOT / "ops" / "bench.py"), "--phases", "extract",
        "--extract-latency-ms", "100", "--extract-jobs", "4", "--extract-workers", "1,2",
        "--extract-enqueue-n", "10", "--extract-raw-n", "2",
        "--locomo", str(LOCOMO), "--out", str(out), "--work-dir", str(tmp_path / "work"),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=280)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    assert "llm extraction, 2 worker thread(s)" in proc.stdout

    section = json.loads(out.read_text())["extract"]
    assert section["llm_latency_ms"] == 100
    assert [r["llm_workers"] for r in section["runs"]] == [1, 2]
    for run in section["runs"]:
        assert run["jobs_failed"] == 0 and run["memories_added"] == 4, run
        assert run["jobs_per_s"] > 0
    saturated = section["saturated"]
    assert saturated["enqueue_saturated"]["n"] == 10 and saturated["raw_ingest_idle"]["n"] == 2
    assert saturated["enqueue_saturated"]["p50_ms"] > 0
    assert not any((tmp_path / "work").iterdir())

"""`python -m ops.bench.proxy` at a tiny size: it runs, prints every measure, and its JSON
report says each way was timed and the memory context went in (no timing is asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ops.bench.docs import proxy_block

ROOT = Path(__file__).resolve().parents[2]


def test_bench_proxy_prints_the_overhead_and_saves_its_report(tmp_path: Path) -> None:
    out = tmp_path / "proxy.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    proc = subprocess.run(
        [sys.executable, "-m", "ops.bench.proxy", "--requests", "4", "--warmup", "1",
         "--memories", "3", "--work-dir", str(tmp_path), "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    assert "first token (stream)" in proc.stdout and "worst overhead p50" in proc.stdout
    report = json.loads(out.read_text())
    for row in report["kinds"].values():
        assert row["direct"]["n"] == row["proxied"]["n"] == row["forwarded"]["n"] == 4
    # Three ways, two kinds, warm-up included: every request reached the upstream.
    assert report["upstream_requests"] == 3 * 2 * (4 + 1)
    # Every proxied request looked memory up for its user (whether any was relevant
    # depends on retrieval, not on the proxy).
    assert sum(report["memory_header"].values()) == 2 * 4
    assert set(report["memory_header"]) <= {"used", "empty"}
    assert report["context_lookup"]["n"] == 2 * 4
    assert report["questions"] == "new"  # the default: every query embedded anew
    page = "\n".join(proxy_block(report))
    assert "each question worded anew" in page
    assert "python -m ops.bench.proxy --requests 4 --memories 3" in page

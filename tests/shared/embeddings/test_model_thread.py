"""The one thread that owns a native model: queries go before queued documents."""

from __future__ import annotations

import threading
import time

import pytest

from shared.embeddings.local import ModelThread


def test_a_query_overtakes_queued_documents() -> None:
    runner = ModelThread("test-model")
    started, release = threading.Event(), threading.Event()
    order: list[str] = []

    def blocking() -> str:
        started.set()
        release.wait(10)
        order.append("running batch")
        return "batch"

    def record(name: str) -> str:
        order.append(name)
        return name

    first = threading.Thread(target=runner.run, args=(ModelThread.DOCUMENTS, blocking))
    first.start()
    assert started.wait(10)
    # The model is busy: a document slice and then a query queue up behind it.
    docs = threading.Thread(target=runner.run, args=(ModelThread.DOCUMENTS, record, "documents"))
    docs.start()
    results: list[str] = []
    query = threading.Thread(
        target=lambda: results.append(runner.run(ModelThread.QUERY, record, "query")))
    while runner._queue.qsize() < 1:
        time.sleep(0.001)
    query.start()
    while runner._queue.qsize() < 2:
        time.sleep(0.001)
    release.set()
    for thread in (first, docs, query):
        thread.join(10)
    assert order == ["running batch", "query", "documents"]
    assert results == ["query"]


def test_errors_reach_the_caller_and_the_thread_goes_on() -> None:
    runner = ModelThread("test-model")

    def fail() -> None:
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        runner.run(ModelThread.QUERY, fail)
    assert runner.run(ModelThread.QUERY, len, "abc") == 3


def test_every_call_runs_on_the_same_thread() -> None:
    runner = ModelThread("test-model")
    seen = {runner.run(ModelThread.QUERY, threading.get_ident) for _ in range(3)}
    seen |= {runner.run(ModelThread.DOCUMENTS, threading.get_ident) for _ in range(3)}
    assert len(seen) == 1 and threading.get_ident() not in seen

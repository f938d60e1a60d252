"""`MEMORYD_LLM_RATE_LIMIT` throttles LLM extraction tasks, in the embedded stack's llm worker
and in a server-mode `memoryd worker`.

The limit is Celery's task `rate_limit` (set on `LLMTask`, workers/llm_task.py), a token
bucket of capacity 1 held by each worker's consumer: one task start per interval per
worker, however many threads or pool processes that worker has. So the fake model's
requests must arrive at least one interval apart. That is a lower bound Celery guarantees,
not a measure of our speed: the fake answers at once, and unthrottled the jobs would reach
it within milliseconds of each other.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memoryd.testing.fake_llm import Behaviour, FakeLLM, Received, json_reply
from ops.chaos.common import FakeOpenAIEmbeddings, wait_jobs
from ops.chaos.procs import UpStack
from ops.chaos.server import server_mode
from tests.support.qdrant_rest_facade import QdrantRestFacade

RATE = "120/m"
INTERVAL_S = 0.5
JOBS = 5
WORKERS = 2  # threads of the embedded llm worker; pool processes of the server worker
WARM_UP = "warm-up turn"


class Stamps:
    """Answers every request with no operations and notes when a measured one arrived.

    Warm-up requests are answered slowly (longer than an interval), so the warm-up jobs
    occupy every thread or pool process in turn: a process's first task is slow (it opens
    the store, the embedder's client), and that one-off delay before the model call would
    otherwise pass for a gap in the spacing.
    """

    def __init__(self) -> None:
        self.times: list[float] = []
        self._lock = threading.Lock()

    def __call__(self, request: Received) -> Behaviour:
        if WARM_UP in request.text:
            return json_reply({"operations": []}, delay_s=INTERVAL_S * 1.6)
        with self._lock:
            self.times.append(time.monotonic())
        return json_reply({"operations": []})


@pytest.fixture()
def model() -> Iterator[tuple[FakeLLM, Stamps]]:
    stamps = Stamps()
    with FakeLLM() as fake:
        fake.responder = stamps
        yield fake, stamps


def llm_settings(fake: FakeLLM) -> dict[str, object]:
    return {"llm_provider": "openai", "llm_base_url": fake.openai_url,
            "llm_model": "rate-limited-model", "llm_rate_limit": RATE,
            "llm_timeout_s": 10}


def post_jobs(api: httpx.Client, tag: str, text: str, n: int) -> list[str]:
    ids = []
    for i in range(n):
        body = {"user_id": f"{tag}-{i}", "extract": "llm",
                "messages": [{"role": "user", "content": f"{text} 第{i}次"}]}
        answer = api.post("/v1/interactions", json=body)
        assert answer.status_code == 202, answer.text
        ids.append(answer.json()["job_id"])
    return ids


def run_jobs(api: httpx.Client, tag: str) -> None:
    wait_jobs(api, post_jobs(api, f"{tag}-warm", WARM_UP, WORKERS), 60)
    wait_jobs(api, post_jobs(api, tag, "I water the plants on Sunday", JOBS), 60)


def assert_spaced(times: list[float]) -> None:
    """The k-th model call arrives no earlier than k intervals after the first, less the
    jitter of the work a task does before its call (redaction, an embedding, a store
    search). That jitter can move one call by a third of a second on a loaded host (a gap
    of 0.15 s between two calls whose task starts were 0.5 s apart was seen), but it does
    not add up over calls, as a missing limit would: unthrottled, the fifth call would
    come 2 s early."""
    assert len(times) == JOBS, times
    early = [k * INTERVAL_S - (t - times[0]) for k, t in enumerate(times)]
    assert max(early) <= INTERVAL_S, early


def test_rate_limit_spaces_model_calls_in_the_embedded_llm_worker(
    tmp_path: Path, model: tuple[FakeLLM, Stamps]
) -> None:
    fake, stamps = model
    embeddings = FakeOpenAIEmbeddings().start()
    try:
        # Two threads on the llm queue: unthrottled they would call the model in pairs.
        with UpStack("rate-limit", tmp_path / "data", tmp_path, embedder="openai:fake-embed",
                     openai_base_url=embeddings.base_url, llm_worker_concurrency=WORKERS,
                     **llm_settings(fake)) as stack, stack.client() as api:
            run_jobs(api, "embedded")
    finally:
        embeddings.stop()
    assert_spaced(stamps.times)


def test_rate_limit_spaces_model_calls_in_a_server_worker(
    tmp_path: Path, model: tuple[FakeLLM, Stamps]
) -> None:
    fake, stamps = model
    # Two pool processes of one `memoryd worker`: the bucket is the worker's, shared by both.
    facade = QdrantRestFacade(tmp_path / "qdrant-server").start()
    try:
        with server_mode(tmp_path / "server", {"qdrant_url": facade.url, **llm_settings(fake)},
                         processes=WORKERS) as ctx:
            run_jobs(ctx.api, "server")
    finally:
        facade.close()
    assert_spaced(stamps.times)

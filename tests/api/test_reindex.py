"""Re-embedding with no downtime: e5-small → use → e5-small on a live stack.

A thread searches in a loop the whole time (every answer must be a 200 with results);
writes made while the copy runs must all be in the new collection; going back to e5
re-embeds only what changed since the e5 generation (the content-hash reuse).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import KEY_A, KEY_B, redis_db_url
from helpers import save, search
from typer.testing import CliRunner
from up_process import start_up, stop_up, wait_ready

from memoryd.index.reindex import allowed_embedders, check_allowed
from memoryd.jobs.names import TaskName
from memoryd.platform.errors import EmbedderNotAllowed
from memoryd.platform.redis_runtime import free_port
from memoryd.platform.settings import Settings
from memoryd.records.models import Owner
from memoryd.retrieval.keywords import PASSAGES_FIELD, keyword_fields
from memoryd.store.edge import EdgeStore
from memoryd.tenancy.auth import OPERATOR_TENANT
from memoryd.workers.cli import app as cli_app

OPERATOR_KEY = "test-operator-key"

FACTS = [
    "I keep bees on the roof of my building", "My sister lives in Lisbon",
    "我每天早上喝一杯乌龙茶", "I am learning to play the cello",
    "我的猫叫豆豆, it is an orange tabby", "I run the Berlin marathon every year",
    "周末我经常去西湖边骑自行车", "My favourite book is The Left Hand of Darkness",
]


# Longer than one of e5's windows: stored in passages, with their keyword counts.
LONG = " ".join(f"Day {i}: we walked the coast path from Porto towards Vigo, {i * 3} km, "
                "and ate grilled sardines at a harbour stall before the rain came in."
                for i in range(40))


def _filler(n: int) -> list[str]:
    topics = ["gardening", "chess", "pottery", "sailing", "birdwatching", "origami"]
    return [f"Note {i}: I spent the evening on {topics[i % len(topics)]} (session {i})"
            for i in range(n)]


class Stack:
    """`memoryd up` in a subprocess: the Celery app and the runtime are process-wide, so
    a second embedded stack inside the test process would share them with the session's."""

    def __init__(self, data_dir: Path, redis_url: str, **env: str) -> None:
        self.base = f"http://127.0.0.1:{free_port()}"
        self.proc = start_up(data_dir, int(self.base.rsplit(":", 1)[1]), {
            "MEMORYD_REDIS_URL": redis_url, "MEMORYD_LOG_LEVEL": "WARNING",
            "MEMORYD_API_KEYS": f"{KEY_A}=tenant-a,{KEY_B}=tenant-b",
            "MEMORYD_OPERATOR_KEYS": OPERATOR_KEY,
            "MEMORYD_REINDEX_EMBEDDERS": "e5-small,use",
            "MEMORYD_LOG_JSON": "true", **env})
        try:
            wait_ready(self.proc, self.base)
        except AssertionError:
            self.stop()
            raise

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base, timeout=30,
                            headers={"Authorization": f"Bearer {KEY_A}"})

    def operator(self) -> httpx.Client:
        return httpx.Client(base_url=self.base, timeout=30,
                            headers={"Authorization": f"Bearer {OPERATOR_KEY}"})

    def stop(self) -> None:
        stop_up(self.proc)


@pytest.fixture()
def redis_url(redis_server: str) -> Iterator[str]:
    url = redis_db_url(redis_server, 9)
    import redis

    client = redis.Redis.from_url(url)
    client.flushdb()
    yield url
    client.flushdb()
    client.close()


class Searcher(threading.Thread):
    """Searches in a loop until stopped; counts answers, errors and empty result lists."""

    def __init__(self, base_url: str, user: str) -> None:
        super().__init__(daemon=True)
        self.client = httpx.Client(base_url=base_url, timeout=30,
                                   headers={"Authorization": f"Bearer {KEY_A}"})
        self.user = user
        self.stop = threading.Event()
        self.answers = 0
        self.errors: list[str] = []
        self.empty = 0

    def run(self) -> None:
        queries = ["who keeps bees?", "我喝什么茶", "which instrument am I learning?"]
        while not self.stop.is_set():
            query = queries[self.answers % len(queries)]
            try:
                response = self.client.post("/v1/search", json={
                    "user_id": self.user, "query": query, "top_k": 3})
            except httpx.HTTPError as exc:
                self.errors.append(repr(exc))
                continue
            if response.status_code != 200:
                self.errors.append(f"{response.status_code} {response.text}")
            elif not response.json()["results"]:
                self.empty += 1
            self.answers += 1
        self.client.close()


def _job(api: httpx.Client, job_id: str) -> dict[str, Any]:
    """A tenant's job, or (with an operator key) a re-embedding's."""
    operator = api.headers["Authorization"] == f"Bearer {OPERATOR_KEY}"
    body: dict[str, Any] = api.get(
        f"/v1/admin/jobs/{job_id}" if operator else f"/v1/jobs/{job_id}").json()
    return body


def _wait(api: httpx.Client, job_id: str, timeout_s: float = 240) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = _job(api, job_id)
        if job["status"] in ("succeeded", "failed"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish: {_job(api, job_id)}")


def _ingest(api: httpx.Client, user: str, texts: list[str]) -> None:
    job = api.post("/v1/interactions", json={
        "user_id": user, "extract": "raw",
        "messages": [{"role": "user", "content": t} for t in texts]}).json()
    assert _wait(api, job["job_id"], 120)["status"] == "succeeded"


def test_reindex_keeps_answering_and_keeps_writes(redis_url: str, tmp_path: Path) -> None:
    stack = Stack(tmp_path, redis_url)
    base = stack.base
    api = stack.client()
    op = stack.operator()
    searcher = Searcher(base, "alice")
    try:
        _ingest(api, "alice", FACTS)
        _ingest(api, "bob", _filler(60))
        _ingest(api, "dave", [LONG])
        before = search(api, "alice", "who keeps bees?", top_k=1)
        assert before[0]["memory"]["content"] == FACTS[0]
        assert op.get("/v1/admin/index").json()["embedder"] == "e5-small"

        bad = op.post("/v1/admin/reindex", json={"embedder": "no-such-model"})
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "embedder"
        assert httpx.post(f"{base}/v1/admin/reindex", json={"embedder": "use"}).status_code == 401
        # A tenant's key, even one with every tenant scope, is no operator key.
        assert api.post("/v1/admin/reindex", json={"embedder": "use"}).status_code == 403

        searcher.start()
        started = op.post("/v1/admin/reindex", json={"embedder": "use", "batch_size": 2})
        assert started.status_code == 202, started.text
        job_id = started.json()["job_id"]
        assert api.get(f"/v1/jobs/{job_id}").status_code == 404  # not a tenant's job
        again = op.post("/v1/admin/reindex", json={"embedder": "use"})
        assert again.status_code == 409 and again.json()["error"]["code"] == "reindex_running"

        # Writes while the copy runs: saves, an edit and a deletion, each noted with the
        # phase the job was in before and after it.
        written: list[tuple[str, str, str]] = []
        bob_items = api.get("/v1/memories", params={"user_id": "bob", "limit": 200}).json()
        edit_id, delete_id = bob_items["items"][0]["id"], bob_items["items"][1]["id"]
        i = 0
        while _job(op, job_id)["status"] not in ("succeeded", "failed") and i < 40:
            phase = (_job(op, job_id).get("progress") or {}).get("phase", "")
            # The edit and the deletion come first: a fast copy may leave time for few writes.
            if i == 0:
                r = api.patch(f"/v1/memories/{edit_id}", params={"user_id": "bob", "wait": 20},
                              json={"content": "Edited during the re-embedding: I took up fencing"})
                assert r.status_code == 200, r.text
            elif i == 1:
                r = api.delete(f"/v1/memories/{delete_id}", params={"user_id": "bob", "wait": 20})
                assert r.status_code == 200, r.text
            else:
                r = save(api, "carol", f"Written during the copy, number {i}: 我喜欢第{i}号")
                assert r.status_code == 201, r.text
            after = (_job(op, job_id).get("progress") or {}).get("phase", "")
            written.append((r.json().get("memory", {}).get("id", ""), phase, after))
            i += 1
        job = _wait(op, job_id)
        assert job["status"] == "succeeded", job
        assert len(written) >= 3, f"the copy ended before the edit, deletion and a save: {written}"
        overlapped = [w for w in written if w[1] == "copying" and w[2] in ("copying",
                                                                           "catching_up")]
        assert overlapped, f"no write overlapped the copy (phases: {written})"
        progress = job["progress"]
        assert progress["phase"] == "done" and progress["done"] == progress["total"] >= 69
        assert job["result"]["embedder"] == "use" and job["result"]["dim"] == 512
        assert op.get("/v1/admin/index").json() == {
            "generation": 1, "collection": "memories_g1", "embedder": "use", "dim": 512,
            "running_job": None, "alias": None, "alias_target": None}

        # Every write survived, in the new collection, searchable with the new model.
        carol = api.get("/v1/memories", params={"user_id": "carol", "limit": 200}).json()
        assert len(carol["items"]) == len(written) - 2  # all but the edit and the deletion
        edited = api.get(f"/v1/memories/{edit_id}", params={"user_id": "bob"}).json()
        assert edited["content"].startswith("Edited during the re-embedding")
        assert api.get(f"/v1/memories/{delete_id}", params={"user_id": "bob"}).status_code == 404
        assert search(api, "bob", "fencing", top_k=1)[0]["memory"]["id"] == edit_id
        assert search(api, "alice", "who keeps bees?", top_k=1)[0]["memory"]["content"] == (
            FACTS[0])

        # After the switch: two new memories and one edit, then back to e5. Only those
        # three, and writes that landed after the switch, are embedded; the rest reuse the
        # e5 generation's vectors (same id, same text).
        late = sum(1 for w in written if w[2] != "copying")
        assert save(api, "alice", "I adopted a greyhound called Pixel").status_code == 201
        assert save(api, "alice", "我下个月要去成都出差").status_code == 201
        alice = api.get("/v1/memories", params={"user_id": "alice", "limit": 200}).json()
        cello = next(m for m in alice["items"] if "cello" in m["content"])
        assert api.patch(f"/v1/memories/{cello['id']}", params={"user_id": "alice", "wait": 20},
                         json={"content": "I am learning to play the double bass"}
                         ).status_code == 200
        # Back through the command line, as an operator would start it.
        back = CliRunner().invoke(cli_app, ["reindex", "--embedder", "e5-small", "--json"],
                                  env={"MEMORYD_URL": stack.base,
                                       "MEMORYD_OPERATOR_KEY": OPERATOR_KEY})
        assert back.exit_code == 0, back.output
        job = _wait(op, json.loads(back.output)["job_id"])
        assert job["status"] == "succeeded", job
        result = job["result"]
        assert 3 <= result["embedded"] <= 3 + late, (result, written)
        assert result["reused"] == result["points"] - result["embedded"] >= 60
        assert search(api, "alice", "which dog did I adopt?", top_k=1)[0]["memory"][
            "content"] == "I adopted a greyhound called Pixel"

        searcher.stop.set()
        searcher.join(30)
        assert searcher.errors == []
        assert searcher.answers > 20 and searcher.empty == 0
    finally:
        searcher.stop.set()
        api.close()
        op.close()
        stack.stop()

    # The pointer is durable: a restart configured for another model follows the store.
    again_stack = Stack(tmp_path, redis_url, MEMORYD_EMBEDDER="use")
    try:
        with again_stack.client() as client, again_stack.operator() as op:
            index = op.get("/v1/admin/index").json()
            assert (index["generation"], index["embedder"]) == (2, "e5-small")
            assert search(client, "alice", "我喝什么茶", top_k=1)[0]["memory"]["content"] == (
                FACTS[2])
    finally:
        again_stack.stop()

    # Each copy holds a long memory's passage keyword counts, read again from its text
    # whether or not its source held them (`reindex._copy`): a store written before they
    # were kept gains them.
    for collection, dim in (("memories_g1", 512), ("memories_g2", 384)):
        store = EdgeStore(tmp_path / "qdrant-edge", collection, audit=False)
        try:
            store.create_if_missing(dim)
            [point] = store.find(Owner(tenant_id="tenant-a", user_id="dave"), [], 10)
            kept = point.payload[PASSAGES_FIELD]
            assert kept == keyword_fields(LONG)[1][PASSAGES_FIELD] and len(kept["passages"]) > 1
        finally:
            store.close()


def test_reindex_moves_the_alias_with_qdrant_client(redis_url: str, tmp_path: Path) -> None:
    """qdrant-client (local mode here, the server in production): the alias
    `memories_active` follows the switch; the home collection keeps the audit trail."""
    stack = Stack(tmp_path, redis_url, MEMORYD_QDRANT_LOCAL_PATH=str(tmp_path / "qdrant"))
    try:
        with stack.client() as api, stack.operator() as op:
            index = op.get("/v1/admin/index").json()
            assert (index["alias"], index["alias_target"]) == ("memories_active", "memories")
            _ingest(api, "dora", FACTS[:4])
            memory_id = search(api, "dora", "my sister", top_k=1)[0]["memory"]["id"]
            started = op.post("/v1/admin/reindex", json={"embedder": "use"})
            job = _wait(op, started.json()["job_id"])
            assert job["status"] == "succeeded", job
            assert (job["progress"]["done"], job["result"]["embedded"]) == (4, 4)
            index = op.get("/v1/admin/index").json()
            assert (index["alias"], index["alias_target"]) == ("memories_active", "memories_g1")
            hit = search(api, "dora", "where does my sister live?", top_k=1)[0]
            assert hit["memory"]["id"] == memory_id
            users = api.get("/v1/users", params={"prefix": "do"}).json()
            assert users["items"] == [{"user_id": "dora", "memories": 4}]
    finally:
        stack.stop()


def test_reindex_takes_only_listed_embedders(stack: Any, base_url: str) -> None:
    """Anything but the configured embedder and the listed ones (by default the bundled
    models) is refused with 422 `embedder_not_allowed` before a job, a lock or an embedder
    exists."""
    key = stack.settings.operator_key_file.read_text().strip()
    jobs_before = len(list(stack.runtime.redis.scan_iter("memoryd:job:*")))
    with httpx.Client(base_url=base_url, timeout=30,
                      headers={"Authorization": f"Bearer {key}"}) as op:
        for spec in ("openai:text-embedding-3-small", "ollama:nomic-embed-text",
                     "sentence-transformers:/etc", "sentence-transformers:../../root/.ssh",
                     "no-such-model"):
            refused = op.post("/v1/admin/reindex", json={"embedder": spec})
            assert refused.status_code == 422, (spec, refused.text)
            error = refused.json()["error"]
            assert (error["code"], error["field"]) == ("embedder_not_allowed", "embedder")
            assert "e5-small" in error["message"]  # says what is allowed
        assert not stack.runtime.redis.exists("memoryd:reindex:lock")
        assert op.get("/v1/admin/index").json()["running_job"] is None
    assert len(list(stack.runtime.redis.scan_iter("memoryd:job:*"))) == jobs_before


def test_worker_refuses_an_unlisted_embedder_too(stack: Any, api: httpx.Client) -> None:
    """A re-embedding task put on the queue by hand (anyone who reaches Redis) fails with
    the same code, frees the lock, and builds nothing."""
    rt = stack.runtime
    job_id = "reindex-by-hand-0001"
    rt.jobs.create(job_id, OPERATOR_TENANT, TaskName.REINDEX.value, None)
    assert rt.redis.set("memoryd:reindex:lock", job_id, nx=True, ex=60)
    rt.celery.send_task(TaskName.REINDEX.value, kwargs={"command": {
        "job_id": job_id, "tenant_id": OPERATOR_TENANT, "request_id": None,
        "embedder": "sentence-transformers:/etc", "batch_size": 8}}, queue="memory")
    key = stack.settings.operator_key_file.read_text().strip()
    with httpx.Client(base_url=str(api.base_url), timeout=30,
                      headers={"Authorization": f"Bearer {key}"}) as op:
        deadline = time.monotonic() + 30
        job = op.get(f"/v1/admin/jobs/{job_id}").json()
        while job["status"] not in ("succeeded", "failed") and time.monotonic() < deadline:
            time.sleep(0.05)
            job = op.get(f"/v1/admin/jobs/{job_id}").json()
        assert job["status"] == "failed", job
        assert job["error"]["code"] == "embedder_not_allowed", job
        assert op.get("/v1/admin/index").json()["embedder"] == "e5-small"
    assert not rt.redis.exists("memoryd:reindex:lock")


def test_an_empty_list_allows_only_the_configured_embedder(tmp_path: Path) -> None:
    """The default lists the bundled models; a deployment can narrow it to nothing else."""
    narrowed = Settings(data_dir=tmp_path, reindex_embedders="")
    assert allowed_embedders(narrowed) == ["e5-small"]
    with pytest.raises(EmbedderNotAllowed):
        check_allowed(narrowed, "use")
    assert allowed_embedders(Settings(data_dir=tmp_path)) == ["e5-small", "use"]

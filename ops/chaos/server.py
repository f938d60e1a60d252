"""Server-mode fault scenarios: a gateway (`memoryd serve`) and a prefork worker
(`memoryd worker`) as separate processes on one Redis.

No Qdrant server runs here, so the store is qdrant-client's local mode (a directory) opened
by the worker's pool process only; the scenario reads it directly once the worker stopped.
Embeddings come from a local fake of a hosted OpenAI-compatible API, which is also what
lets a scenario make the remote call slow.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from memoryd.platform import failpoints
from memoryd.records.models import Owner
from memoryd.store.client import QdrantClientStore
from ops.chaos.common import (
    TENANT,
    FakeOpenAIEmbeddings,
    RestartableRedis,
    Row,
    note_text,
    raw_interaction,
    tally,
    wait_jobs,
)
from ops.chaos.procs import kill_pid, start_gateway, start_worker
from ops.stack import Proc, ScenarioFailed, wait_until
from tests.support.qdrant_rest_facade import QdrantRestFacade

KEY = "chaos-server-key"


@dataclass
class ServerMode:
    work: Path
    api: httpx.Client
    worker: Proc
    fake: FakeOpenAIEmbeddings
    failpoint_dir: Path
    redis: RestartableRedis

    def post(self, user: str, texts: list[str]) -> list[str]:
        ids = []
        for text in texts:
            answer = self.api.post("/v1/interactions", json=raw_interaction(user, text))
            if answer.status_code != 202:
                raise ScenarioFailed(f"enqueue answered {answer.status_code}: {answer.text}")
            ids.append(answer.json()["job_id"])
        return ids

    def running(self, job_ids: list[str]) -> list[str]:
        return [j for j in job_ids
                if self.api.get(f"/v1/jobs/{j}").json().get("status") == "running"]

    def status(self, job_id: str) -> str:
        return str(self.api.get(f"/v1/jobs/{job_id}").json().get("status"))

    def pool_pid(self) -> int:
        children = self.worker.children()
        if len(children) != 1:
            raise ScenarioFailed(f"expected one pool process, found {children}")
        return children[0]


@contextlib.contextmanager
def server_mode(work: Path, settings: dict[str, object] | None = None,
                processes: int = 1) -> Iterator[ServerMode]:
    work.mkdir(parents=True, exist_ok=True)
    fp_dir = work / "failpoints"
    fp_dir.mkdir(exist_ok=True)
    redis = RestartableRedis(work / "redis-data")
    fake = FakeOpenAIEmbeddings().start()
    values: dict[str, object] = {
        "redis_url": redis.url, "embedder": "openai:fake-embed",
        "openai_base_url": fake.base_url, "api_keys": f"{KEY}={TENANT}",
        "failpoint_dir": fp_dir, **(settings or {}),
    }
    if "qdrant_url" not in values:
        values["qdrant_local_path"] = work / "qdrant"
    procs: list[Proc] = []
    try:
        gateway, base = start_gateway(work, values)
        procs.append(gateway)
        worker = start_worker(work, values, processes)
        procs.append(worker)
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {KEY}"},
                          timeout=30, trust_env=False) as api:
            yield ServerMode(work, api, worker, fake, fp_dir, redis)
    finally:
        for proc in reversed(procs):
            proc.stop()
        fake.stop()
        redis.stop()


def stored(work: Path, user: str, url: str | None = None) -> tuple[list[str], list[int]]:
    """Contents of the user's points, and the ADD audit events of each (read directly)."""
    store = (QdrantClientStore("memories", url=url) if url
             else QdrantClientStore("memories", path=work / "qdrant"))
    try:
        owner = Owner(tenant_id=TENANT, user_id=user)
        points = store.find(owner, [], limit=100_000)
        adds = [sum(1 for e in store.audit_of(owner, p.id) if e.event == "ADD") for p in points]
        return [str(p.payload["content"]) for p in points], adds
    finally:
        store.close()


def _finish(scenario: str, work: Path, ctx: ServerMode, user: str, texts: list[str],
            job_ids: list[str], recoveries: list[float], notes: list[str],
            store_url: str | None = None) -> Row:
    wait_jobs(ctx.api, job_ids, 300)
    ctx.worker.stop()  # the local-mode store opens in one process at a time
    contents, adds = stored(work, user, store_url)
    wrong_audit = sum(1 for a in adds if a != 1)
    if wrong_audit:
        notes.append(f"{wrong_audit} memories without exactly one ADD audit event")
    row = tally(scenario, len(texts), texts, contents, max(recoveries, default=0.0), notes)
    row.duplicates += wrong_audit  # a missing or doubled audit event is a wrong effect too
    return row


def _batches(texts: list[str], kills: int) -> list[list[str]]:
    """One batch per kill, so every kill finds a job still to run (writes take ms)."""
    size = -(-len(texts) // max(kills, 1))
    return [texts[i:i + size] for i in range(0, len(texts), size)]


def _await_victims(ctx: ServerMode, victims: list[str], killed_at: float) -> float:
    for job_id in victims:
        wait_until(lambda j=job_id: ctx.status(j) == "succeeded", 120,  # type: ignore[misc]
                   f"killed job {job_id} to succeed after redelivery")
    return time.monotonic() - killed_at


def worker_killed_in_store_write(work: Path, n: int, kills: int) -> Row:
    """SIGKILL the pool process right after it wrote a memory point, before the job finished
    or the message was acknowledged; Celery requeues it (acks_late, reject_on_worker_lost)."""
    user = f"kill-write-{uuid.uuid4().hex[:8]}"
    texts = [note_text("w", i) for i in range(n)]
    recoveries: list[float] = []
    job_ids: list[str] = []
    marker = failpoints.STORE_UPSERT
    with server_mode(work, {"failpoints": marker}) as ctx:
        for batch in _batches(texts, kills):
            ids = ctx.post(user, batch)
            job_ids += ids
            wait_until(lambda: failpoints.reached(ctx.failpoint_dir, marker) is not None, 120,
                       "a worker to reach the store write")
            victims = ctx.running(ids)
            pid = failpoints.reached(ctx.failpoint_dir, marker)
            assert pid is not None
            kill_pid(pid)
            recoveries.append(_await_victims(ctx, victims, time.monotonic()))
            wait_jobs(ctx.api, ids, 120)
            (ctx.failpoint_dir / marker).unlink()  # armed again for the next batch
        (ctx.failpoint_dir / marker).write_text("0")  # disarmed
        return _finish("worker SIGKILL in store write (server)", work, ctx, user, texts,
                       job_ids, recoveries, [f"{len(recoveries)} kills"])


def worker_killed_in_slow_embedding(work: Path, n: int, kills: int) -> Row:
    """SIGKILL the pool process while it waits on a slow remote embedding call (the LLM
    call has its own drill: `ops/chaos/llm.py`)."""
    user = f"kill-remote-{uuid.uuid4().hex[:8]}"
    texts = [note_text("r", i) for i in range(n)]
    recoveries: list[float] = []
    job_ids: list[str] = []
    with server_mode(work) as ctx:
        for batch in _batches(texts, kills):
            ctx.fake.slow(60)
            ids = ctx.post(user, batch)
            job_ids += ids
            wait_until(lambda i=ids: ctx.fake.in_flight > 0 and bool(ctx.running(i)),  # type: ignore[misc]
                       120, "a worker to wait on the embedding provider")
            victims = ctx.running(ids)
            kill_pid(ctx.pool_pid())
            killed_at = time.monotonic()
            ctx.fake.fast()
            recoveries.append(_await_victims(ctx, victims, killed_at))
            wait_jobs(ctx.api, ids, 120)
        return _finish("worker SIGKILL in slow remote call (server)", work, ctx, user, texts,
                       job_ids, recoveries, [f"{len(recoveries)} kills"])


def store_unreachable(work: Path, n: int, outage_s: float = 3.0, **settings: object) -> Row:
    """The Qdrant server does not answer (its port refuses): enqueue still answers 202,
    search 503 `store_unavailable`, jobs retry; it comes back on the same address and they
    finish. The server is `QdrantRestFacade`: Qdrant's REST API over the local-mode engine."""
    user = f"store-down-{uuid.uuid4().hex[:8]}"
    texts = [note_text("d", i) for i in range(n)]
    facade = QdrantRestFacade(work / "qdrant-server").start()
    try:
        values = {"qdrant_url": facade.url, "qdrant_timeout_s": 2, **settings}
        with server_mode(work, values) as ctx:
            facade.stop()
            job_ids = ctx.post(user, texts)
            search = ctx.api.post("/v1/search", json={"user_id": user, "query": "notes"})
            if search.status_code != 503 or (
                search.json().get("error", {}).get("code") != "store_unavailable"
            ):
                raise ScenarioFailed(f"search while the store is down: {search.status_code} "
                                     f"{search.text}")

            def retrying() -> bool:
                body = ctx.api.get(f"/v1/jobs/{job_ids[0]}").json()
                return bool(body.get("status") == "retrying"
                            and body.get("error", {}).get("code") == "store_unavailable")

            wait_until(retrying, 60, "a job to retry with store_unavailable")
            time.sleep(outage_s)
            facade.start()
            back = time.monotonic()
            wait_jobs(ctx.api, job_ids, 180)
            recovery = time.monotonic() - back
            return _finish("store unreachable (server)", work, ctx, user, texts, job_ids,
                           [recovery], ["202 while down; search 503 store_unavailable"],
                           store_url=facade.url)
    finally:
        facade.close()


def concurrent_worker_processes(work: Path, n: int, processes: int = 8) -> Row:
    """`processes` prefork worker processes ingest `n` interactions of one user repeating
    the same facts (rules extraction) into one Qdrant server: every fact stored once."""
    from ops.chaos.embedded import repeated_facts

    user = f"concurrent-proc-{uuid.uuid4().hex[:8]}"
    bodies, expected = repeated_facts(user, n)
    facade = QdrantRestFacade(work / "qdrant-server").start()
    try:
        with server_mode(work, {"qdrant_url": facade.url}, processes) as ctx:
            started = time.monotonic()
            job_ids = []
            for body in bodies:
                answer = ctx.api.post("/v1/interactions", json=body)
                if answer.status_code != 202:
                    raise ScenarioFailed(f"enqueue answered {answer.status_code}: {answer.text}")
                job_ids.append(answer.json()["job_id"])
            wait_jobs(ctx.api, job_ids, 900)
            rate = n / (time.monotonic() - started)
            contents, _ = stored(work, user, facade.url)
    finally:
        facade.close()
    return tally(f"{processes} worker processes, same facts repeated (server)", n, expected,
                 contents, None, [f"{rate:.0f} interactions/s"])

"""Embedded-mode fault scenarios: `memoryd up` (gateway, in-process worker threads, Qdrant
Edge, its own Redis) as a subprocess, driven over HTTP."""

from __future__ import annotations

import contextlib
import signal
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from memoryd.extraction.rules import extract_rules
from memoryd.platform import failpoints
from memoryd.platform.redis_process import pid_alive
from ops.chaos.common import (
    FakeOpenAIEmbeddings,
    RestartableRedis,
    Row,
    list_contents,
    note_text,
    raw_interaction,
    recovered,
    tally,
    wait_jobs,
)
from ops.chaos.procs import UpStack
from ops.stack import ScenarioFailed, wait_until

# Facts the rules extractor turns into one memory each; no two say the same thing in two
# languages, so each must be stored exactly once however often it is repeated.
FACTS = [
    "I live in Lisbon.", "My daughter is called Mia.", "I am allergic to peanuts.",
    "我喜欢吃火锅。", "我住在北京。", "I work as a nurse at the city hospital.",
    "My favourite colour is green.", "I prefer tea over coffee.", "我是一名软件工程师。",
    "I have a cat named Tofu.", "我最喜欢的城市是成都。", "I plan to visit Japan next spring.",
    "我打算明年学日语。", "I drive a blue Honda Civic.", "我养了一只叫豆豆的狗。",
]


def repeated_facts(user: str, n: int) -> tuple[list[dict[str, Any]], set[str]]:
    """`n` interactions, each two of FACTS, and the memories the rules extractor makes."""
    bodies, expected = [], set()
    for i in range(n):
        pair = [FACTS[i % len(FACTS)], FACTS[(i * 7 + 3) % len(FACTS)]]
        expected |= {c.content for c in extract_rules(pair)}
        bodies.append({"user_id": user, "extract": "rules",
                       "messages": [{"role": "user", "content": t} for t in pair]})
    return bodies, expected


@contextlib.contextmanager
def running(stack: UpStack) -> Iterator[UpStack]:
    try:
        stack.start()
        yield stack
    except ScenarioFailed:
        # Before it is stopped: every thread's stack into the stack's log (SIGUSR1,
        # `memoryd up` registers faulthandler for it), to show what a stalled run waited on.
        if stack.proc is not None and stack.proc.poll() is None:
            stack.proc.send_signal(signal.SIGUSR1)
            time.sleep(1.0)
        raise
    finally:
        stack.stop()


def post_all(api: httpx.Client, bodies: list[dict[str, Any]], clients: int = 4) -> list[str]:
    def one(body: dict[str, Any]) -> str:
        answer = api.post("/v1/interactions", json=body)
        if answer.status_code != 202:
            raise ScenarioFailed(f"enqueue answered {answer.status_code}: {answer.text}")
        return str(answer.json()["job_id"])

    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(one, bodies))


def stack_killed_and_restarted(work: Path, n: int, embedder: str = "e5-small") -> Row:
    """SIGKILL `memoryd up` while a job is mid-write (and others wait), start it again: its
    unacked tasks are requeued at start instead of after the visibility timeout."""
    user = f"stack-kill-{uuid.uuid4().hex[:8]}"
    texts = [note_text("s", i) for i in range(n)]
    fp_dir = work / "failpoints"
    fp_dir.mkdir(parents=True, exist_ok=True)
    stack = UpStack("killed", work / "data", work, embedder=embedder,
                    failpoints=failpoints.STORE_UPSERT, failpoint_dir=fp_dir)
    notes: list[str] = []
    with running(stack):
        with stack.client() as api:
            job_ids = post_all(api, [raw_interaction(user, t) for t in texts])
        wait_until(lambda: failpoints.reached(fp_dir, failpoints.STORE_UPSERT) is not None, 120,
                   "the stack to reach a store write")
        redis_pid = stack._redis_pid()
        stack.kill()
        if redis_pid is not None:
            # Its Redis gets SIGTERM when memoryd dies (PR_SET_PDEATHSIG) and saves on exit.
            with contextlib.suppress(ScenarioFailed):
                wait_until(lambda: not pid_alive(redis_pid), 10, "the orphaned Redis to exit")
            notes.append("orphan Redis still running: adopted" if pid_alive(redis_pid)
                         else "orphan Redis exited: replaced, AOF replayed")
        started = time.monotonic()
        stack.start()
        notes.append(f"restart {time.monotonic() - started:.1f}s")
        with stack.client() as api:
            recovery, contents = recovered(api, job_ids, user, 120)
        log = stack.log_path.read_text(errors="replace")
        if "requeued_unacked_after_crash" not in log:
            raise ScenarioFailed("the restarted stack did not requeue the crashed run's tasks")
    return tally("embedded stack SIGKILL + restart", n, texts, contents, recovery, notes)


def redis_restarted(work: Path, n: int, embedder: str = "e5-small") -> Row:
    """Restart Redis (SIGTERM, start again on the same AOF) while jobs are queued."""
    user = f"redis-restart-{uuid.uuid4().hex[:8]}"
    texts = [note_text("q", i) for i in range(n)]
    with RestartableRedis(work / "redis-data") as redis:
        stack = UpStack("redis", work / "data", work, embedder=embedder, redis_url=redis.url)
        with running(stack), stack.client() as api:
            job_ids = post_all(api, [raw_interaction(user, t) for t in texts])
            left = sum(1 for j in job_ids
                       if api.get(f"/v1/jobs/{j}").json().get("status") != "succeeded")
            redis.stop()
            redis.start()
            recovery, contents = recovered(api, job_ids, user, 180)
    return tally("Redis restarted (AOF), jobs queued", n, texts, contents, recovery,
                 [f"{left} of {n} not done at the restart"])


# Where `redis_away_at` takes Redis away, and what a job has done there.
AWAY_AT = {
    failpoints.BROKER_TAKEN: "a worker took its message off the queue",
    failpoints.JOB_FINISH: "its writes are done, its success not yet recorded",
}


def redis_away_at(work: Path, failpoint: str, n: int, pause_s: float = 3.0,
                  outage_s: float = 4.0, embedder: str = "e5-small") -> Row:
    """Redis goes away while the first job to reach `failpoint` waits there (see AWAY_AT),
    and is back `outage_s` after that job went on: every job still ends `succeeded`, each
    memory stored once."""
    user = f"redis-away-{uuid.uuid4().hex[:8]}"
    texts = [note_text("a", i) for i in range(n)]
    fp_dir = work / "failpoints"
    fp_dir.mkdir(parents=True, exist_ok=True)
    with RestartableRedis(work / "redis-data") as redis:
        stack = UpStack("redis-away", work / "data", work, embedder=embedder,
                        redis_url=redis.url, failpoints=failpoint, failpoint_dir=fp_dir,
                        failpoint_pause_s=pause_s)
        with running(stack), stack.client() as api:
            job_ids = post_all(api, [raw_interaction(user, t) for t in texts])
            wait_until(lambda: failpoints.reached(fp_dir, failpoint) is not None, 120,
                       f"a job to reach {failpoint}")
            redis.stop()
            time.sleep(pause_s + outage_s)  # the job goes on while Redis is away
            redis.start()
            recovery, contents = recovered(api, job_ids, user, 120)
    return tally(f"Redis away when {AWAY_AT[failpoint]}", n, texts, contents, recovery,
                 [f"Redis away {pause_s + outage_s:.0f}s"])


def embedder_unreachable(work: Path, n: int, outage_s: float = 3.0, **settings: object) -> Row:
    """The embedding provider goes away: enqueue still answers 202, search 503
    `embedder_unavailable`, jobs retry; it comes back on the same port and they finish."""
    user = f"embedder-down-{uuid.uuid4().hex[:8]}"
    texts = [note_text("e", i) for i in range(n)]
    fake = FakeOpenAIEmbeddings().start()
    stack = UpStack("embedder", work / "data", work, embedder="openai:fake-embed",
                    openai_base_url=fake.base_url, **settings)
    try:
        with running(stack), stack.client() as api:
            fake.stop()
            job_ids = post_all(api, [raw_interaction(user, t) for t in texts])
            search = api.post("/v1/search", json={"user_id": user, "query": f"note {user}"})
            code = search.json().get("error", {}).get("code")
            if search.status_code != 503 or code != "embedder_unavailable":
                raise ScenarioFailed(f"search while the embedder is down: {search.status_code} "
                                     f"{search.text}")

            def retrying() -> bool:
                body = api.get(f"/v1/jobs/{job_ids[0]}").json()
                return bool(body.get("status") == "retrying"
                            and body.get("error", {}).get("code") == "embedder_unavailable")

            wait_until(retrying, 60, "a job to retry with embedder_unavailable")
            time.sleep(outage_s)
            fake.start()
            recovery, contents = recovered(api, job_ids, user, 180)
    finally:
        fake.stop()
    return tally("embedding provider unreachable", n, texts, contents, recovery,
                 ["202 while down; search 503 embedder_unavailable"])


def concurrent_workers(work: Path, n: int, threads: int = 8,
                       embedder: str = "e5-small") -> Row:
    """`threads` worker threads ingest `n` interactions of one user repeating the same facts
    (rules extraction): every fact stored exactly once."""
    user = f"concurrent-{uuid.uuid4().hex[:8]}"
    bodies, expected = repeated_facts(user, n)
    stack = UpStack("concurrent", work / "data", work, embedder=embedder,
                    worker_concurrency=threads)
    with running(stack), stack.client() as api:
        started = time.monotonic()
        job_ids = post_all(api, bodies)
        wait_jobs(api, job_ids, 900)
        elapsed = time.monotonic() - started
        contents = list_contents(api, user)
    return tally(f"{threads} worker threads, same facts repeated", n, expected, contents, None,
                 [f"{n / elapsed:.0f} interactions/s"])

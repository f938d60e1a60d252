"""Server mode: `memoryd worker` starts a prefork Celery worker that consumes every queue."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from memoryd.jobs.celery_app import create_app
from memoryd.platform.settings import Settings


def test_worker_process_starts_and_answers_ping(redis_server: str) -> None:
    url = redis_server.rsplit("/", 1)[0] + "/3"
    env = {**os.environ, "MEMORYD_REDIS_URL": url, "MEMORYD_LOG_LEVEL": "WARNING"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "memoryd.workers.cli", "worker", "--concurrency", "1"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    app = create_app(Settings(redis_url=url))
    try:
        replies: list[dict[str, object]] = []
        deadline = time.monotonic() + 60
        while not replies and time.monotonic() < deadline and proc.poll() is None:
            replies = app.control.ping(timeout=1.0) or []
        exited = proc.poll() is not None
        assert replies, proc.stdout.read() if exited and proc.stdout else "no reply"
        queues = app.control.inspect(timeout=2.0).active_queues() or {}
        names = {q["name"] for worker in queues.values() for q in worker}
        assert names == {"memory", "llm", "bulk"}
        registered = app.control.inspect(timeout=2.0).registered() or {}
        tasks = {t for worker in registered.values() for t in worker}
        assert {"memory.ingest", "memory.save", "memory.forget"} <= tasks
    finally:
        proc.terminate()
        proc.wait(30)
        app.close()

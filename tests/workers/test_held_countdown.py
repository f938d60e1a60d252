"""The one message an idle `memoryd up` holds: a task sent with a countdown (the access-count
flush a search schedules one window ahead) is taken by a worker at once and kept,
unacknowledged, until it is due. `memoryd status` names it, and the stop says what kombu's
"Restoring 1 unacknowledged message(s)" is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
from conftest import KEY_A, redis_db_url
from up_process import start_up, stop_up, wait_ready

from memoryd.jobs.celery_app import create_app
from memoryd.platform.redis_runtime import free_port
from memoryd.platform.settings import Settings
from memoryd.retrieval.access import schedule_flush

ROOT = Path(__file__).resolve().parents[2]


def test_a_held_countdown_is_named_by_status_and_at_stop(redis_server: str,
                                                         tmp_path: Path) -> None:
    redis_url = redis_db_url(redis_server, 15)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "up.log"
    with log.open("w") as stderr:
        proc = start_up(tmp_path / "data", port, {
            "MEMORYD_REDIS_URL": redis_url, "MEMORYD_START_REDIS": "false",
            "MEMORYD_API_KEYS": f"{KEY_A}=tenant-a", "MEMORYD_LOG_FORMAT": "json"},
            stderr=stderr)
        try:
            wait_ready(proc, base)
            # What the gateway sends after a search's window, sent here to the stack's broker.
            celery = create_app(Settings(redis_url=redis_url))
            schedule_flush(celery, 120.0)
            metrics = ""
            for _ in range(100):
                metrics = httpx.get(f"{base}/metrics", timeout=10).text
                if 'memoryd_tasks_scheduled{task="memory.flush_access"} 1.0' in metrics:
                    break
                time.sleep(0.1)
            assert "memoryd_tasks_unacked 1.0" in metrics, metrics
            env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
            env.update(PYTHONPATH=str(ROOT), MEMORYD_URL=base, MEMORYD_API_KEY=KEY_A,
                       COLUMNS="100")
            status = subprocess.run([sys.executable, "-m", "memoryd.workers.cli", "status"],
                                    env=env, capture_output=True, text=True, timeout=120)
            assert status.returncode == 0, status.stdout + status.stderr
            rows = {line.split("│")[1].strip(): line.split("│")[2].strip()
                    for line in status.stdout.splitlines() if line.count("│") >= 3}
            assert rows["(taken: running or reserved)"] == "0", status.stdout
            assert rows["(taken: held for a countdown) memory.flush_access"] == "1", status.stdout
        finally:
            stop_up(proc)
    lines = [json.loads(line) for line in log.read_text().splitlines()
             if line.startswith("{")]
    named = [e for e in lines if e.get("event") == "held_for_countdown_requeued"]
    assert named and named[0]["tasks"] == {"memory.flush_access": 1}, lines[-10:]
    # kombu gave it back to its queue: the next start runs it when due.
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        assert client.hlen("unacked") == 0
        assert client.llen("memory") == 1
        client.delete("memory")  # this database is this test's own
    finally:
        client.close()

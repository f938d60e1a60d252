"""One request's id appears in the JSON log lines of the task it caused: `memoryd up` runs
as a user runs it, and its real stderr is read back."""

from __future__ import annotations

import json
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from conftest import redis_db_url
from up_process import start_up, wait_ready

from memoryd.platform.redis_runtime import free_port


def test_request_id_reaches_the_task_logs(redis_server: str, tmp_path: Path) -> None:
    port = free_port()
    log_path = tmp_path / "stderr.log"
    with log_path.open("w") as log_file:
        proc = start_up(tmp_path / "data", port, {
            "MEMORYD_REDIS_URL": redis_db_url(redis_server, 10), "MEMORYD_LOG_JSON": "true",
            "MEMORYD_LOG_LEVEL": "INFO", "MEMORYD_API_KEYS": "log-key=tenant-log",
            "MEMORYD_SEARCH_RECORD_ACCESS": "false"}, stderr=log_file)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_ready(proc, base)
            deadline = time.monotonic() + 120
            request_id = f"req-{uuid.uuid4().hex}"
            headers = {"Authorization": "Bearer log-key", "X-Request-ID": request_id}
            response = httpx.post(f"{base}/v1/interactions", headers=headers, timeout=30, json={
                "user_id": "u1", "extract": "raw",
                "messages": [{"role": "user", "content": "记住: my locker code is 4711"}]})
            assert response.status_code == 202, response.text
            assert response.headers["x-request-id"] == request_id
            job_id = response.json()["job_id"]
            while httpx.get(f"{base}/v1/jobs/{job_id}", headers=headers,
                            timeout=10).json()["status"] != "succeeded":
                assert time.monotonic() < deadline + 60, "the job did not finish"
                time.sleep(0.05)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(60)

    records: list[dict[str, Any]] = []
    for line in log_path.read_text().splitlines():
        if line.startswith("{"):
            records.append(json.loads(line))
    task_lines = [r for r in records if r.get("job_id") == job_id]
    assert task_lines, log_path.read_text()[-3000:]
    assert all(r["request_id"] == request_id for r in task_lines)
    assert {"task_succeeded"} <= {r["event"] for r in task_lines}
    assert task_lines[0]["task"] == "memory.ingest"

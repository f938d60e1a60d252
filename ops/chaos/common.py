"""What every fault scenario shares: the result row, the tally, waiting, and a local fake of
a hosted OpenAI-compatible embedding API (the one service here we cannot reach for real).

`tests/faults/` runs the same scenarios at a small size, so CI and `python -m ops.chaos`
exercise one code path. Starting, waiting for and stopping processes is `ops/stack.py`,
shared with the bench.
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from memoryd.platform.redis_runtime import ensure_redis, free_port
from ops.stack import ScenarioFailed, wait_until
from tests.support.local_http import ReopenableServer

FAKE_DIM = 64
TENANT = "default"



@dataclass
class Row:
    scenario: str
    sent: int
    expected: int
    found: int
    duplicates: int
    lost: int
    recovery_s: float | None  # None: the scenario injects no fault to recover from
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.duplicates == 0 and self.lost == 0 and self.found == self.expected


def tally(scenario: str, sent: int, expected: Iterable[str], contents: Iterable[str],
          recovery_s: float | None, notes: list[str] | None = None) -> Row:
    """Stored contents against the distinct facts that should each be there exactly once."""
    want = set(expected)
    counts = Counter(contents)
    duplicates = sum(n - 1 for n in counts.values() if n > 1)
    stray = set(counts) - want
    row = Row(scenario, sent, len(want), len(set(counts) & want), duplicates,
              len(want - set(counts)),
              None if recovery_s is None else round(recovery_s, 2), list(notes or []))
    if stray:
        row.notes.append(f"{len(stray)} unexpected memories, e.g. {sorted(stray)[:2]}")
    return row




def raw_interaction(user: str, text: str) -> dict[str, Any]:
    return {"user_id": user, "extract": "raw", "messages": [{"role": "user", "content": text}]}


def note_text(run: str, i: int) -> str:
    """A distinct, mixed Chinese/English episodic note."""
    return f"Chaos note {run}-{i}: 今天第{i}次记录, item {i} of run {run}"


def list_contents(client: httpx.Client, user: str) -> list[str]:
    """Every memory of `user` through the gateway, page by page (duplicates kept)."""
    contents: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"user_id": user, "limit": 200}
        if cursor:
            params["cursor"] = cursor
        page = client.get("/v1/memories", params=params)
        if page.status_code != 200:
            raise ScenarioFailed(f"listing memories answered {page.status_code}: {page.text}")
        body = page.json()
        contents += [item["content"] for item in body["items"]]
        cursor = body.get("next_cursor")
        if not cursor:
            return contents


def jobs_done(client: httpx.Client, job_ids: Iterable[str]) -> tuple[int, list[str]]:
    """How many of `job_ids` succeeded, and the failed ones with their error."""
    succeeded, failed = 0, []
    for job_id in job_ids:
        body = client.get(f"/v1/jobs/{job_id}").json()
        if body.get("status") == "succeeded":
            succeeded += 1
        elif body.get("status") == "failed":
            failed.append(f"{job_id}: {body.get('error')}")
    return succeeded, failed


def wait_jobs(client: httpx.Client, job_ids: list[str], timeout_s: float) -> float:
    pending = list(job_ids)

    def finished() -> bool:
        nonlocal pending
        still = []
        for job_id in pending:
            body = client.get(f"/v1/jobs/{job_id}").json()
            if body.get("status") == "failed":
                raise ScenarioFailed(f"job {job_id} failed: {body.get('error')}")
            if body.get("status") != "succeeded":
                still.append(job_id)
        pending = still
        return not pending

    try:
        return wait_until(finished, timeout_s, f"{len(job_ids)} jobs to succeed", 0.1)
    except ScenarioFailed as exc:
        # What the late ones are doing, for a drill that failed where nobody watched (CI).
        states = Counter(str(client.get(f"/v1/jobs/{j}").json().get("status")) for j in pending)
        raise ScenarioFailed(f"{exc}; {len(pending)} not done ({dict(states)}), first "
                             f"{pending[0]}") from exc


class RestartableRedis:
    """A redis-server of the drill's own on a free port, with its AOF under `data_dir`,
    that a drill stops (SIGTERM: Redis fsyncs its AOF and exits) and starts again on the
    same port and directory."""

    def __init__(self, data_dir: Path) -> None:
        self.url = f"redis://127.0.0.1:{free_port()}/0"
        self._dir = data_dir
        self._handle = ensure_redis(self.url, data_dir)

    def stop(self) -> None:
        self._handle.stop()

    def start(self) -> None:
        self._handle = ensure_redis(self.url, self._dir)

    def __enter__(self) -> RestartableRedis:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def recovered(client: httpx.Client, job_ids: list[str], user: str,
              timeout_s: float) -> tuple[float, list[str]]:
    """Seconds from now until every job succeeded, and `user`'s memories then: a drill
    calls it right as its fault ends (its "max recovery")."""
    back = time.monotonic()
    wait_jobs(client, job_ids, timeout_s)
    return time.monotonic() - back, list_contents(client, user)


# --- a fake hosted embedding API ---------------------------------------------------------


def fake_vector(text: str) -> list[float]:
    """Deterministic per text; distinct texts land far apart, so only true repeats dedup."""
    rng = np.random.default_rng(zlib.crc32(text.encode("utf-8")))
    return [float(x) for x in rng.normal(0.0, 1.0, FAKE_DIM)]


class FakeOpenAIEmbeddings(ReopenableServer):
    """`POST /v1/embeddings` as OpenAI answers it, on 127.0.0.1. `delay_s` makes every call
    slow; stop() closes the port (connection refused) and start() reopens the same port."""

    def __init__(self) -> None:
        super().__init__()
        self.delay_s = 0.0
        self.calls = 0
        self.in_flight = 0
        self._lock = threading.Lock()
        self._release = threading.Event()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAIEmbeddings:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                with fake._lock:
                    fake.calls += 1
                    fake.in_flight += 1
                try:
                    if fake.delay_s:
                        fake._release.wait(fake.delay_s)
                    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                    payload = {
                        "object": "list", "model": body.get("model", "fake"),
                        "data": [{"object": "embedding", "index": i, "embedding": fake_vector(t)}
                                 for i, t in enumerate(texts)],
                        "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
                    }
                    raw = json.dumps(payload).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    # One request per connection: after stop() no kept-alive socket answers.
                    self.send_header("Connection", "close")
                    self.close_connection = True
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the caller was killed mid-call: that is the point of the drill
                finally:
                    with fake._lock:
                        fake.in_flight -= 1

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._release.clear()
        self.open(Handler)
        return self

    def slow(self, delay_s: float) -> None:
        """Every call from now on takes `delay_s` (a provider that hangs)."""
        self._release.clear()
        self.delay_s = delay_s

    def fast(self) -> None:
        """Answer at once again, ending the slow calls in progress too."""
        self.delay_s = 0.0
        self._release.set()

    def stop(self) -> None:
        self._release.set()  # a slow call in progress ends now
        super().stop()

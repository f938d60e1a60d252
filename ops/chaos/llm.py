"""Server mode, LLM extraction: a prefork worker's pool process SIGKILLed during the model
call; the job is redelivered and completes with exactly one memory and one ADD event.

The model is `shared/testing/fake_llm.py` speaking OpenAI chat completions on 127.0.0.1,
run in this process. Its responder answers every extraction with one ADD of the user's own
line, so each interaction yields exactly one distinct memory. Kills alternate between two
points of the call: the `llm.extract` failpoint (the worker stopped right before it sends
the request) and the model's reply held back (the request is in flight at the provider).
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

from memoryd.platform import failpoints
from memoryd.testing.fake_llm import Behaviour, FakeLLM, Received, json_reply, users_said
from ops.chaos.common import Row, wait_jobs
from ops.chaos.procs import kill_pid
from ops.chaos.server import ServerMode, _await_victims, _batches, _finish, server_mode
from ops.stack import ScenarioFailed, wait_until

MODEL = "chaos-extractor"


def llm_note(run: str, i: int) -> str:
    """A distinct, mixed Chinese/English statement a user makes about themselves."""
    return f"I am learning 书法 with teacher {run}-{i}: 我每周练习第{i}课 in run {run}"


def one_add(request: Received) -> Behaviour:
    """One ADD of the last thing the user said, as the extraction prompt transcribes it."""
    said = users_said(request)
    if not said:
        return json_reply({"operations": []})
    return json_reply({"operations": [
        {"action": "ADD", "type": "semantic", "category": "fact", "content": said[-1],
         "confidence": 0.95, "importance": 5},
    ]})


class ModelGate:
    """The fake model's responder: answers `one_add`, or while held keeps the request
    waiting (the provider thinking) until released."""

    def __init__(self) -> None:
        self.calls = 0
        self.waiting = 0
        self._open = threading.Event()
        self._open.set()
        self._lock = threading.Lock()

    def hold(self) -> None:
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def __call__(self, request: Received) -> Behaviour:
        with self._lock:
            self.calls += 1
            self.waiting += 1
        try:
            self._open.wait(120)
        finally:
            with self._lock:
                self.waiting -= 1
        return one_add(request)


def _post_llm(ctx: ServerMode, user: str, texts: list[str]) -> list[str]:
    ids = []
    for text in texts:
        answer = ctx.api.post("/v1/interactions", json={
            "user_id": user, "extract": "llm",
            "messages": [{"role": "user", "content": text}],
        })
        if answer.status_code != 202:
            raise ScenarioFailed(f"enqueue answered {answer.status_code}: {answer.text}")
        ids.append(answer.json()["job_id"])
    return ids


def worker_killed_in_llm_call(work: Path, n: int, kills: int) -> Row:
    """`kills` batches; in each, the pool process running an LLM extraction job is SIGKILLed
    mid-call (even batches at the failpoint, odd ones with the request at the model)."""
    user = f"kill-llm-{uuid.uuid4().hex[:8]}"
    texts = [llm_note("l", i) for i in range(n)]
    recoveries: list[float] = []
    job_ids: list[str] = []
    marker = failpoints.LLM_EXTRACT
    at_failpoint = in_flight = 0
    gate = ModelGate()
    with FakeLLM() as llm:
        llm.responder = gate
        settings: dict[str, object] = {
            "llm_provider": "openai", "llm_base_url": llm.openai_url, "llm_model": MODEL,
            "llm_timeout_s": 150, "failpoints": marker,
        }
        with server_mode(work, settings) as ctx:
            flag = ctx.failpoint_dir / marker
            for k, batch in enumerate(_batches(texts, kills)):
                use_failpoint = k % 2 == 0
                if use_failpoint:
                    flag.unlink(missing_ok=True)  # armed: the next job to reach it stops
                else:
                    flag.write_text("0")  # disarmed: the model holds the reply instead
                    gate.hold()
                ids = _post_llm(ctx, user, batch)
                job_ids += ids
                if use_failpoint:
                    wait_until(lambda: failpoints.reached(ctx.failpoint_dir, marker)
                               is not None, 120, "a worker to reach the LLM call")
                    pid = failpoints.reached(ctx.failpoint_dir, marker)
                    assert pid is not None
                    at_failpoint += 1
                else:
                    wait_until(lambda i=ids: gate.waiting > 0 and bool(ctx.running(i)),  # type: ignore[misc]
                               120, "a worker to wait on the model's reply")
                    pid = ctx.pool_pid()
                    in_flight += 1
                victims = ctx.running(ids)
                if not victims:
                    raise ScenarioFailed("no job was running when the worker was killed")
                kill_pid(pid)
                killed_at = time.monotonic()
                gate.release()
                recoveries.append(_await_victims(ctx, victims, killed_at))
                wait_jobs(ctx.api, ids, 120)
            flag.write_text("0")
            notes = [f"{len(recoveries)} kills ({at_failpoint} at the failpoint before the "
                     f"request, {in_flight} with the request at the model)",
                     f"model asked {gate.calls} times for {n} interactions"]
            return _finish("worker SIGKILL in LLM call (server)", work, ctx, user, texts,
                           job_ids, recoveries, notes)

"""`memoryd up` as a user runs it: starts its own Redis, prints how to connect, stops every
child on Ctrl-C, and finds every memory again on the next start."""

from __future__ import annotations

import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner
from up_process import start_up, wait_ready

from memoryd.platform.redis_runtime import free_port, redis_reachable
from memoryd.workers.cli import app as cli_app


def start(data_dir: Path, port: int, redis_port: int) -> subprocess.Popen[str]:
    return start_up(data_dir, port, {"MEMORYD_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
                                     "MEMORYD_LOG_JSON": "true", "MEMORYD_LOG_LEVEL": "WARNING"})


def interrupt(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    # uvicorn re-raises SIGINT once it has shut down, so a Ctrl-C exit is the usual 130.
    assert proc.returncode in (0, 130), output
    assert "Traceback" not in output, output
    return output


def children_in(data_dir: Path) -> list[int]:
    """Processes still running with the data dir on their command line (our Redis)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if str(data_dir) in cmdline:
                alive.append(int(entry.name))
    return alive


def running_up(data_dir: Path, procs: list[subprocess.Popen[str]], port: int | None = None,
               redis_port: int | None = None) -> tuple[subprocess.Popen[str], str]:
    """`memoryd up` started and answering; the fixture `procs` kills it if a test fails."""
    port = port or free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start(data_dir, port, redis_port or free_port())
    procs.append(proc)
    wait_ready(proc, base)
    return proc, base


@pytest.fixture()
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_up_stop_and_restart_keeps_memories(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    port, redis_port = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start(tmp_path, port, redis_port)
    procs.append(proc)
    wait_ready(proc, base)
    key = (tmp_path / "api-key").read_text().strip()
    headers = {"Authorization": f"Bearer {key}"}
    saved = httpx.post(f"{base}/v1/memories", params={"wait": 20}, headers=headers, timeout=30,
                       json={"user_id": "ana", "content": "Ana's favourite tea is genmaicha"})
    assert saved.status_code == 201, saved.text
    output = interrupt(proc)
    assert base in output and key in output and str(tmp_path) in output
    redis_url = next(line.split("redis: ", 1)[1] for line in output.splitlines()
                     if line.startswith("redis: "))
    password = (tmp_path / "redis" / "password").read_text().strip()
    assert "***" in redis_url and password not in output
    assert not redis_reachable(redis_url.replace("***", password))
    assert not children_in(tmp_path), "a child process outlived memoryd"

    again = start(tmp_path, port, redis_port)
    procs.append(again)
    wait_ready(again, base)
    found = httpx.post(f"{base}/v1/search", headers=headers, timeout=30,
                       json={"user_id": "ana", "query": "what tea does Ana like?"}).json()
    assert found["results"][0]["memory"]["id"] == saved.json()["memory"]["id"]
    interrupt(again)


def test_up_keeps_its_secrets_private(tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    """A data directory created 0700 (parents it creates too), keys and the Redis password
    0600, the Redis password masked in the banner and absent from all output; the operator
    key named, not printed; `memoryd keys create --operator` reaches the password-protected
    Redis and its key (not the tenant's) reaches the store-wide routes."""
    data_dir = tmp_path / "home" / "memoryd"
    redis_port = free_port()
    proc, base = running_up(data_dir, procs, redis_port=redis_port)
    for directory in (data_dir.parent, data_dir, data_dir / "redis"):
        assert directory.stat().st_mode & 0o777 == 0o700, directory
    for secret in ("api-key", "operator-key", "redis/password"):
        assert (data_dir / secret).stat().st_mode & 0o777 == 0o600, secret
    password = (data_dir / "redis" / "password").read_text().strip()
    assert not redis_reachable(f"redis://127.0.0.1:{redis_port}/0")
    tenant_key = (data_dir / "api-key").read_text().strip()
    operator_file_key = (data_dir / "operator-key").read_text().strip()

    env = {"MEMORYD_DATA_DIR": str(data_dir),
           "MEMORYD_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0"}
    made = CliRunner().invoke(cli_app, ["keys", "create", "--operator", "--name", "ops"], env=env)
    assert made.exit_code == 0, made.output
    operator_key = made.output.splitlines()[0].strip()
    assert operator_key.startswith("mk_") and "(operator)" in made.output
    both = CliRunner().invoke(cli_app, ["keys", "create", "--operator", "--tenant", "a"], env=env)
    assert both.exit_code == 2

    for key in (operator_key, operator_file_key):
        index = httpx.get(f"{base}/v1/admin/index", headers={"Authorization": f"Bearer {key}"})
        assert index.status_code == 200, index.text
    refused = httpx.get(f"{base}/v1/admin/index",
                        headers={"Authorization": f"Bearer {tenant_key}"})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"

    output = interrupt(proc)
    assert f"redis: redis://:***@127.0.0.1:{redis_port}/0" in output
    assert password not in output
    assert str(data_dir / "operator-key") in output and operator_file_key not in output


def test_sigterm_stops_the_stack_as_ctrl_c_does(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    """`docker stop`, systemd and `kill` send SIGTERM: the stack still stops its worker,
    store and Redis itself, so the next start does not take the run for a crash."""
    port, redis_port = free_port(), free_port()
    proc, base = running_up(tmp_path, procs, port, redis_port)
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, output
    assert "Traceback" not in output, output
    assert not redis_reachable(f"redis://127.0.0.1:{redis_port}/0")
    assert not children_in(tmp_path), "a child process outlived memoryd"

    again, _ = running_up(tmp_path, procs, port, redis_port)
    output = interrupt(again)
    assert "requeued_unacked_after_crash" not in output, output


def test_sigusr1_dumps_every_thread_and_the_stack_keeps_serving(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    """What a stuck stack waits on, without stopping it: the fault drills send SIGUSR1
    before they give up, so a stalled run's log shows every thread's stack."""
    proc, base = running_up(tmp_path, procs)
    proc.send_signal(signal.SIGUSR1)
    assert httpx.get(f"{base}/healthz", timeout=10, trust_env=False).status_code == 200
    output = interrupt(proc)
    # faulthandler's format: one "Thread 0x…" block per thread (the main thread's says
    # "Current thread"); the gateway, the Celery worker and its pool make many.
    threads = output.count("Thread 0x") + output.count("Current thread 0x")
    assert threads >= 3, output
    assert "workers/inprocess.py" in output or "celery" in output, output


def test_a_port_another_program_holds_ends_the_start_at_once(tmp_path: Path) -> None:
    """The gateway's port is checked before anything starts: when it is taken, `memoryd up`
    says so and exits, with no Redis, store or worker started (it used to start them all,
    then hang in the gateway's shutdown)."""
    data_dir = tmp_path / "data"
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        proc = start(data_dir, port, free_port())
        output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, output
    assert f"cannot listen on 127.0.0.1:{port}" in " ".join(output.split()), output
    assert "Traceback" not in output, output
    assert not data_dir.exists(), "the stack started before it had its port"

"""The processes a fault scenario starts, kills and starts again: `memoryd up` (embedded),
and for server mode `memoryd serve` (gateway) and `memoryd worker` (prefork Celery)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import httpx

from memoryd.platform.redis_runtime import free_port
from ops.stack import Proc, ScenarioFailed, Stack, clean_env, wait_until


class UpStack(Stack):
    """`memoryd up` with chosen settings, on ports that stay the same across restarts.

    Not tied to this process and its log appended to: a drill kills and restarts it itself.
    """

    tied = False
    log_mode = "ab"

    def __init__(self, label: str, data_dir: Path, log_dir: Path, **settings: object) -> None:
        super().__init__(label, data_dir, log_dir, str(settings.get("embedder", "e5-small")))
        settings.setdefault("redis_url", f"redis://127.0.0.1:{free_port()}/0")
        self.settings = settings

    def env(self) -> dict[str, str]:
        return clean_env(**self.settings)

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, nothing is acknowledged or requeued."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(30)


def start_gateway(log_dir: Path, **settings: object) -> tuple[Proc, str]:
    """`memoryd serve`; returns it and its base URL once it answers."""
    port = free_port()
    gateway = Proc(["serve", "--port", str(port)], log_dir / "gateway.log", settings).start()
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if not gateway.alive():
            raise ScenarioFailed(f"memoryd serve exited:\n{gateway.log_tail()}")
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(f"{base}/healthz", timeout=1, trust_env=False).status_code == 200
        return False

    wait_until(up, 90, "memoryd serve to answer", 0.2)
    return gateway, base


def start_worker(log_dir: Path, concurrency: int = 1, **settings: object) -> Proc:
    """`memoryd worker` (prefork), returned once its pool processes exist."""
    worker = Proc(["worker", "--concurrency", str(concurrency), "--loglevel", "WARNING"],
                  log_dir / "worker.log", settings).start()

    def forked() -> bool:
        if not worker.alive():
            raise ScenarioFailed(f"memoryd worker exited:\n{worker.log_tail()}")
        return len(worker.children()) >= concurrency

    wait_until(forked, 90, "the worker's pool processes", 0.2)
    return worker


def kill_pid(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
        stat = Path(f"/proc/{pid}/stat")
        with contextlib.suppress(OSError, IndexError):
            if stat.read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                return
        time.sleep(0.02)

"""The processes a fault scenario starts, kills and starts again: `memoryd up` (embedded),
and for server mode `memoryd serve` (gateway) and `memoryd worker` (prefork Celery)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
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


def start_gateway(log_dir: Path, settings: dict[str, object],
                  tied: bool = False) -> tuple[Proc, str]:
    """`memoryd serve`; returns it and its base URL once it answers (stopped again if it
    does not). `tied`: it dies with this process (`ops.stack.tied`), as a bench's must."""
    port = free_port()
    gateway = Proc(["serve", "--port", str(port)], log_dir / "gateway.log", settings,
                   tied=tied).start()
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if not gateway.alive():
            raise ScenarioFailed(f"memoryd serve exited:\n{gateway.log_tail()}")
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(f"{base}/healthz", timeout=1, trust_env=False).status_code == 200
        return False

    _started(gateway, up, "memoryd serve to answer")
    return gateway, base


def start_worker(log_dir: Path, settings: dict[str, object], concurrency: int = 1,
                 queues: str | None = None, hostname: str | None = None,
                 tied: bool = False) -> Proc:
    """`memoryd worker` (prefork), returned once its pool processes exist (stopped again if
    they do not). `queues` and `hostname` as the CLI takes them (default: its own); a
    worker with a `hostname` logs to a file of that name, so several can run side by side."""
    args = ["worker", "--concurrency", str(concurrency), "--loglevel", "WARNING"]
    args += ["--queues", queues] if queues else []
    args += ["--hostname", hostname] if hostname else []
    name = hostname.split("@", 1)[0] if hostname else "worker"
    worker = Proc(args, log_dir / f"{name}.log", settings, tied=tied).start()

    def forked() -> bool:
        if not worker.alive():
            raise ScenarioFailed(f"memoryd worker exited:\n{worker.log_tail()}")
        return len(worker.children()) >= concurrency

    _started(worker, forked, "the worker's pool processes")
    return worker


def _started(proc: Proc, ready: Callable[[], bool], what: str) -> None:
    try:
        wait_until(ready, 90, what, 0.2)
    except BaseException:
        proc.stop()
        raise


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

"""The processes a fault scenario starts, kills and starts again: `memoryd up` (embedded),
and for server mode `memoryd serve` (gateway) and `memoryd worker` (prefork Celery)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from ops.bench_common import ROOT
from ops.bench_stack import Stack
from ops.chaos_common import ScenarioFailed, clean_env, wait_until
from shared.platform.redis_runtime import free_port


class UpStack(Stack):
    """`memoryd up` with chosen settings, on ports that stay the same across restarts."""

    def __init__(self, label: str, data_dir: Path, log_dir: Path, **settings: object) -> None:
        super().__init__(label, data_dir, log_dir, str(settings.get("embedder", "e5-small")))
        settings.setdefault("redis_url", f"redis://127.0.0.1:{free_port()}/0")
        self.settings = settings

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "workers.cli", "up", "--port", str(self.port),
               "--data-dir", str(self.data_dir)]
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                cmd, cwd=ROOT, env=clean_env(**self.settings), stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )
        self._wait_ready()
        self.api_key = (self.data_dir / "api-key").read_text().strip()

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, nothing is acknowledged or requeued."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(30)


class Proc:
    """A `memoryd` subcommand in its own session, its output appended to a log file."""

    def __init__(self, args: list[str], log_path: Path, settings: dict[str, object]) -> None:
        self.args = args
        self.log_path = log_path
        self.settings = settings
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Proc:
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "workers.cli", *self.args], cwd=ROOT,
                env=clean_env(**self.settings), stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def children(self) -> list[int]:
        """Direct children (a prefork worker's pool processes)."""
        found: list[int] = []
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{self.pid}/task").iterdir():
                with contextlib.suppress(OSError, ValueError):
                    found += [int(p) for p in (task / "children").read_text().split()]
        return found

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout_s: float = 30.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


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

"""`memoryd up` as a subprocess, for tests that need a stack of their own: the Celery app
and the runtime are process-wide, so a second embedded stack cannot share the test process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import httpx


def start_up(data_dir: Path, port: int, env: dict[str, str],
             stderr: IO[str] | int = subprocess.STDOUT) -> subprocess.Popen[str]:
    """`memoryd up` with only the given MEMORYD_* settings (none leak in from this process).
    Output goes to a pipe (read on failure), or stderr to the given file."""
    values = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    values.update(env)
    return subprocess.Popen(
        [sys.executable, "-m", "memoryd.workers.cli", "up", "--port", str(port), "--data-dir",
         str(data_dir)],
        env=values, text=True, stderr=stderr,
        stdout=subprocess.PIPE if stderr == subprocess.STDOUT else subprocess.DEVNULL,
    )


def wait_ready(proc: subprocess.Popen[str], base: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out = proc.stdout.read() if proc.stdout else ""
            raise AssertionError(f"memoryd up exited: {out}")
        try:
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError("memoryd up did not become ready")


def stop_up(proc: subprocess.Popen[str]) -> None:
    """Stop `memoryd up` as Ctrl-C does (a graceful stop), and kill it if that hangs."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()

"""The embedded redis-server as an OS process: spawning it, its files, and finding orphans.

Files in `<data_dir>/redis`: `runtime.json` (`{pid, port, owner}`: which server serves this
directory, on which port, started by which process), `redis.pid`, `redis.log`,
`redis.stdio.log` (errors printed before the log file is opened), `.lock` (serialises
concurrent starts from the gateway and workers), `auth.conf` (only when the URL has a
password; kept out of argv so `ps` does not show it).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, unquote

__all__ = [
    "AUTH_FILE",
    "LOCK_FILE",
    "LOG_FILE",
    "PID_FILE",
    "RUNTIME_FILE",
    "STDIO_FILE",
    "auth_conf",
    "clear_runtime",
    "dir_lock",
    "launch",
    "log_sizes",
    "log_tail",
    "pid_alive",
    "read_runtime",
    "serves_dir",
    "stop_child",
    "stop_pid",
    "write_runtime",
]

RUNTIME_FILE = "runtime.json"
PID_FILE = "redis.pid"
LOG_FILE = "redis.log"
STDIO_FILE = "redis.stdio.log"
LOCK_FILE = ".lock"
AUTH_FILE = "auth.conf"
_PR_SET_PDEATHSIG = 1


# --- runtime records ---------------------------------------------------------------------


def read_runtime(redis_dir: Path) -> dict[str, int]:
    try:
        raw: Any = json.loads((redis_dir / RUNTIME_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raw = {}
    record = {k: v for k, v in raw.items() if isinstance(v, int)} if isinstance(raw, dict) else {}
    if "pid" not in record:
        with contextlib.suppress(OSError, ValueError):
            record["pid"] = int((redis_dir / PID_FILE).read_text(encoding="ascii").strip())
    return record


def write_runtime(redis_dir: Path, pid: int, port: int) -> None:
    tmp = redis_dir / f"{RUNTIME_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps({"pid": pid, "port": port, "owner": os.getpid()}), "utf-8")
    os.replace(tmp, redis_dir / RUNTIME_FILE)


def clear_runtime(redis_dir: Path, pid: int | None) -> None:
    """Remove the records, but only those still describing `pid` (None: any)."""
    if pid is None or read_runtime(redis_dir).get("pid") == pid:
        with contextlib.suppress(OSError):
            (redis_dir / RUNTIME_FILE).unlink()
    with contextlib.suppress(OSError, ValueError):
        recorded = int((redis_dir / PID_FILE).read_text(encoding="ascii").strip())
        if pid is None or recorded == pid:
            (redis_dir / PID_FILE).unlink()


# --- process checks and stopping ---------------------------------------------------------


def pid_alive(pid: int) -> bool:
    # Reap it if it is our own exited child, or a zombie would look alive forever.
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
        return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    return True


def serves_dir(pid: int, redis_dir: Path) -> bool:
    """Whether `pid` is a redis-server working in `redis_dir` (redis chdirs to `--dir`)."""
    proc = Path(f"/proc/{pid}")
    if proc.is_dir():
        try:
            cwd = os.readlink(proc / "cwd")
            names = [
                os.path.basename(os.readlink(proc / "exe")),
                (proc / "comm").read_text(encoding="utf-8", errors="replace").strip(),
            ]
        except OSError:
            return False
        return cwd == str(redis_dir) and any("redis" in name for name in names)
    # No /proc: the pid came from a file in our own directory; settle for the command name.
    try:
        out = subprocess.run(
            ["ps", "-o", "comm=", "-p", str(pid)], capture_output=True, text=True, timeout=5
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "redis" in out


def stop_child(process: subprocess.Popen[bytes], timeout_s: float) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.terminate()
        process.send_signal(signal.SIGCONT)
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(5)


def stop_pid(pid: int, timeout_s: float) -> None:
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
            # A stopped (SIGSTOP) process only acts on SIGTERM once continued.
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                return
            time.sleep(0.05)


# --- spawning ----------------------------------------------------------------------------


@contextlib.contextmanager
def dir_lock(redis_dir: Path) -> Iterator[None]:
    if sys.platform == "win32":
        yield
        return
    import fcntl

    with open(redis_dir / LOCK_FILE, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def auth_conf(parts: SplitResult, redis_dir: Path) -> Path | None:
    path = redis_dir / AUTH_FILE
    if parts.password is None:
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    password = unquote(parts.password)
    user = unquote(parts.username) if parts.username else "default"
    if user == "default":
        body = f"requirepass {_conf_quote(password)}\n"
    else:
        body = f"user default off\nuser {_conf_quote(user)} on {_conf_quote('>' + password)} "
        body += "~* &* +@all\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(body)
    return path


def _conf_quote(value: str) -> str:
    escaped = "".join(
        f"\\x{b:02x}" if b < 0x20 or b in (0x22, 0x5C) or b >= 0x7F else chr(b)
        for b in value.encode("utf-8")
    )
    return f'"{escaped}"'


def _pdeathsig_hook() -> Callable[[], None] | None:
    """Best effort on Linux: the child gets SIGTERM (a clean, saving shutdown) if we die.

    PR_SET_PDEATHSIG fires when the spawning *thread* exits, so it is only armed from the
    main thread; otherwise a worker thread finishing would take Redis down with it.
    """
    if not sys.platform.startswith("linux"):
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()
    sigterm = int(signal.SIGTERM)

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, sigterm, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os.kill(os.getpid(), sigterm)

    return hook


def launch(binary: Path, parts: SplitResult, redis_dir: Path, port: int) -> subprocess.Popen[bytes]:
    cmd = [str(binary)]
    auth = auth_conf(parts, redis_dir)
    if auth is not None:
        cmd.append(str(auth))
    cmd += [
        "--bind", "127.0.0.1",
        "--port", str(port),
        "--dir", str(redis_dir),
        "--appendonly", "yes",
        "--appendfsync", "everysec",
        "--save", "60", "1",
        "--daemonize", "no",
        "--protected-mode", "yes",
        "--pidfile", str(redis_dir / PID_FILE),
        "--logfile", str(redis_dir / LOG_FILE),
    ]  # fmt: skip
    with open(redis_dir / STDIO_FILE, "ab") as stdio:
        return subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=stdio,
            stderr=subprocess.STDOUT,
            cwd=redis_dir,
            # Own session: a terminal Ctrl-C reaches memoryd, which then stops Redis in order.
            start_new_session=True,
            preexec_fn=_pdeathsig_hook(),
        )


def log_sizes(redis_dir: Path) -> dict[str, int]:
    sizes = {}
    for name in (STDIO_FILE, LOG_FILE):
        try:
            sizes[name] = (redis_dir / name).stat().st_size
        except OSError:
            sizes[name] = 0
    return sizes


def log_tail(redis_dir: Path, since: dict[str, int], lines: int = 20) -> str:
    chunks = []
    for name, offset in since.items():
        with contextlib.suppress(OSError), open(redis_dir / name, "rb") as handle:
            handle.seek(offset)
            chunks.append(handle.read().decode("utf-8", errors="replace"))
    text = "\n".join(chunk.strip() for chunk in chunks if chunk.strip())
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"

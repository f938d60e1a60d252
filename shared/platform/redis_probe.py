"""Probing a Redis URL, and the small URL and port helpers that `redis_runtime` uses."""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import subprocess
import time
from typing import Literal
from urllib.parse import SplitResult, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from memoryd.platform.logs import mask_url_passwords
from memoryd.platform.redis_process import pid_alive

__all__ = [
    "Probe",
    "is_loopback",
    "local_url",
    "port_free",
    "probe",
    "redact",
    "wait_ready",
]

Probe = Literal["ok", "loading", "down"]


def probe(url: str, timeout_s: float) -> Probe:
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


def wait_ready(
    url: str,
    timeout_s: float,
    *,
    process: subprocess.Popen[bytes] | None = None,
    pid: int | None = None,
) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        if probe(url, 0.5) == "ok":
            return True
        if process is not None and process.poll() is not None:
            return False
        if pid is not None and not pid_alive(pid):
            return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Same option redis sets, so a port in TIME_WAIT does not count as occupied.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def is_loopback(host: str | None) -> bool:
    if not host or host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def redact(url: str) -> str:
    """The URL with its password masked (`memoryd.platform.logs.mask_url_passwords`)."""
    return mask_url_passwords(url)


def local_url(parts: SplitResult, port: int) -> str:
    """The URL of a server we run: always 127.0.0.1 (the only bind), credentials and db kept."""
    userinfo = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit(parts._replace(netloc=f"{userinfo}127.0.0.1:{port}"))

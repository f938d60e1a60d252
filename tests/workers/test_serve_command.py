"""`memoryd serve`, the gateway of server mode, as compose and a user start it: it reads
MEMORYD_HOST and MEMORYD_PORT as `memoryd up` does, and a start that cannot succeed (its
port taken, no API keys) says why and exits, without a traceback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from memoryd.platform.redis_runtime import free_port


def serve(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    values = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    values.update(env)
    return subprocess.Popen([sys.executable, "-m", "memoryd.workers.cli", "serve", *args],
                            env=values, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)


def server_mode(redis_url: str, tmp_path: Path, **more: str) -> dict[str, str]:
    # No Qdrant answers at this address: the gateway still serves, /readyz says 503.
    return {"MEMORYD_REDIS_URL": redis_url, "MEMORYD_QDRANT_URL": f"http://127.0.0.1:{free_port()}",
            "MEMORYD_DATA_DIR": str(tmp_path), "MEMORYD_LOG_LEVEL": "WARNING", **more}


def test_a_start_that_cannot_succeed_says_why(redis_server: str, tmp_path: Path) -> None:
    no_keys = serve(server_mode(redis_server, tmp_path), "--port", str(free_port()))
    output, _ = no_keys.communicate(timeout=120)
    assert no_keys.returncode == 1, output
    assert "memoryd could not start: set MEMORYD_API_KEYS" in output
    assert "Traceback" not in output and "╭" not in output, output

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        taken = serve(server_mode(redis_server, tmp_path, MEMORYD_API_KEYS="k1=t1"),
                      "--port", str(port))
        output, _ = taken.communicate(timeout=120)
    assert taken.returncode == 1, output
    assert f"cannot listen on 127.0.0.1:{port}" in " ".join(output.split()), output
    assert "Traceback" not in output, output


def test_the_port_setting_is_read_and_sigterm_stops_it(redis_server: str,
                                                       tmp_path: Path) -> None:
    port = free_port()
    proc = serve(server_mode(redis_server, tmp_path, MEMORYD_API_KEYS="k1=t1",
                             MEMORYD_PORT=str(port)))
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "memoryd serve did not answer"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1,
                             trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + signal.SIGTERM, output
    assert "Traceback" not in output, output

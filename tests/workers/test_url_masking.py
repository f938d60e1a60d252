"""Passwords inside URLs never reach logs, error messages or the command line's output:
one helper (`memoryd.platform.logs.mask_url_passwords`) masks them everywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from typer.testing import CliRunner

from memoryd.embeddings.factory import make_embedder
from memoryd.platform.errors import EmbedderUnavailable
from memoryd.platform.logs import mask_url_passwords
from memoryd.platform.redis_runtime import free_port
from memoryd.platform.settings import Settings
from memoryd.workers.cli import app as cli_app

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_mask_url_passwords() -> None:
    cases = {
        "redis://:hunter2@127.0.0.1:6379/0": "redis://:***@127.0.0.1:6379/0",
        "redis://ops:hunter2@redis:6379/0": "redis://ops:***@redis:6379/0",
        "rediss://:p%40ss@host": "rediss://:***@host",
        "at 'redis://:a:b@c@host:1/2' (down)": "at 'redis://:***@host:1/2' (down)",
        "two: redis://:x1@h1 and http://u:x2@h2/p": "two: redis://:***@h1 and http://u:***@h2/p",
        "redis://127.0.0.1:6379/0": "redis://127.0.0.1:6379/0",
        "https://host/path?q=a:b@c": "https://host/path?q=a:b@c",
        "no url: a:b@c": "no url: a:b@c",
    }
    for given, shown in cases.items():
        assert mask_url_passwords(given) == shown, given


def test_logs_mask_url_passwords_in_every_field_and_traceback() -> None:
    """The real logging setup in a process of its own (it is configured once per process)."""
    script = textwrap.dedent("""
        from memoryd.platform.logs import configure_logging, get_logger
        configure_logging("INFO", json=True)
        log = get_logger("memoryd.test")
        log.warning("redis_down", url="redis://:hunter2@10.0.0.9:6379/0",
                    urls=["redis://u:hunter3@h/0"])
        try:
            raise ConnectionError("cannot reach redis://:hunter4@10.0.0.9:6379/0")
        except ConnectionError:
            log.exception("reconnect_failed")
        import logging
        logging.getLogger("celery").error("broker at redis://:hunter5@h:1/0 is down")
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert len(lines) == 3, done.stderr
    assert "hunter" not in done.stderr, done.stderr
    assert lines[0]["url"] == "redis://:***@10.0.0.9:6379/0"
    assert lines[0]["urls"] == ["redis://u:***@h/0"]
    assert "redis://:***@10.0.0.9:6379/0" in lines[1]["exception"]
    assert lines[2]["event"] == "broker at redis://:***@h:1/0 is down"


def test_error_messages_mask_url_passwords() -> None:
    """A real embedder call to a closed port: the error names the URL, not its password."""
    port = free_port()
    settings = Settings(openai_base_url=f"http://svc:hunter2@127.0.0.1:{port}/v1",
                        openai_api_key="sk-test", embed_timeout_s=2)
    embedder = make_embedder("openai:text-embedding-3-small", settings)
    try:
        embedder.embed_query("hello")
    except EmbedderUnavailable as exc:
        assert "hunter2" not in exc.message and "hunter2" not in str(exc)
        assert f"http://svc:***@127.0.0.1:{port}" in exc.message
        assert "hunter2" not in json.dumps(exc.to_dict())
    else:
        raise AssertionError("a closed port answered")


def test_cli_masks_the_redis_password(tmp_path: Path) -> None:
    url = f"redis://:hunter2@127.0.0.1:{free_port()}/0"
    env = {"MEMORYD_REDIS_URL": url, "MEMORYD_DATA_DIR": str(tmp_path),
           "MEMORYD_REDIS_TIMEOUT_S": "1"}
    listed = CliRunner().invoke(cli_app, ["keys", "list"], env=env)
    assert listed.exit_code == 1
    assert "hunter2" not in listed.output
    # A non-local URL memoryd cannot start: the start error names it, masked.
    remote = "redis://:hunter2@192.0.2.1:6379/0"
    up = CliRunner().invoke(cli_app, ["up", "--data-dir", str(tmp_path), "--port",
                                      str(free_port())],
                            env={"MEMORYD_REDIS_URL": remote, "MEMORYD_LOG_LEVEL": "ERROR"})
    assert up.exit_code == 1, up.output
    assert "redis://:***@192.0.2.1:6379/0" in up.output and "hunter2" not in up.output

"""Settings from a dotenv file (`./.env`, `--env-file`, `MEMORYD_ENV_FILE`) under the
environment, `memoryd config` saying where each value came from, `--version`, and the log
format of `memoryd up` on a terminal: the `memoryd` command run as a user runs it, in a
subprocess, with no MEMORYD_* variable leaking in from the test process."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY_A, redis_db_url

from memoryd.platform.redis_runtime import free_port
from memoryd.platform.settings import Settings, describe

ROOT = Path(__file__).resolve().parents[2]
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def plain(text: str) -> str:
    """Terminal output without its colour codes."""
    return _COLOUR.sub("", text)


def memoryd(*args: str, cwd: Path, env: dict[str, str] | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
    values = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    values["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    values["COLUMNS"] = "200"
    values.update(env or {})
    return subprocess.run([sys.executable, "-m", "memoryd.workers.cli", *args], cwd=cwd, env=values,
                          capture_output=True, text=True, timeout=timeout)


def config_json(*args: str, cwd: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    done = memoryd(*args, "config", "--json", cwd=cwd, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in report["settings"]}


def test_dotenv_in_the_working_directory_and_the_environment_over_it(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text(
        "# memoryd\nMEMORYD_PORT=9301\nMEMORYD_SEARCH_DEPTH=150\n"
        "MEMORYD_REDIS_URL=redis://:hunter2@db.example:6380/2\n"
        "MEMORYD_API_KEYS=sk-dotenv=tenant-x\nOTHER_APP_SETTING=ignored\n", encoding="utf-8")
    report = config_json(cwd=tmp_path, env={"MEMORYD_PORT": "9302"})
    rows = by_name(report)
    assert report["env_file"] == str(env_file)
    # The environment wins over the file; the file over the defaults.
    assert rows["MEMORYD_PORT"] == {"name": "MEMORYD_PORT", "value": 9302, "source": "env"}
    assert rows["MEMORYD_SEARCH_DEPTH"]["value"] == 150
    assert rows["MEMORYD_SEARCH_DEPTH"]["source"] == str(env_file)
    assert rows["MEMORYD_LOG_LEVEL"] == {"name": "MEMORYD_LOG_LEVEL", "value": "INFO",
                                         "source": "default"}
    # Secrets masked: a SecretStr entirely, a URL's password in place.
    assert rows["MEMORYD_API_KEYS"]["value"] == "***"
    assert rows["MEMORYD_REDIS_URL"]["value"] == "redis://:***@db.example:6380/2"
    assert "hunter2" not in json.dumps(report) and "sk-dotenv" not in json.dumps(report)

    table = memoryd("config", "--changed", cwd=tmp_path, env={"MEMORYD_PORT": "9302"})
    assert table.returncode == 0, table.stderr
    assert f"dotenv file: {env_file}" in table.stdout
    lines = {line.split("│")[1].strip(): line for line in table.stdout.splitlines()
             if line.startswith("│")}
    assert set(lines) == {"MEMORYD_PORT", "MEMORYD_SEARCH_DEPTH", "MEMORYD_REDIS_URL",
                          "MEMORYD_API_KEYS"}
    assert "env" in lines["MEMORYD_PORT"] and str(env_file) in lines["MEMORYD_SEARCH_DEPTH"]
    assert "hunter2" not in table.stdout


def test_env_file_option_and_variable_name_another_file(tmp_path: Path) -> None:
    here = tmp_path / "project"
    here.mkdir()
    (here / ".env").write_text("MEMORYD_SEARCH_DEPTH=111\n", encoding="utf-8")
    other = tmp_path / "prod.env"
    other.write_text("MEMORYD_SEARCH_DEPTH=222\nMEMORYD_LOG_LEVEL=WARNING\n", encoding="utf-8")

    rows = by_name(config_json("--env-file", str(other), cwd=here))
    assert rows["MEMORYD_SEARCH_DEPTH"] == {"name": "MEMORYD_SEARCH_DEPTH", "value": 222,
                                            "source": str(other)}
    assert rows["MEMORYD_LOG_LEVEL"]["source"] == str(other)
    rows = by_name(config_json(cwd=here, env={"MEMORYD_ENV_FILE": str(other)}))
    assert rows["MEMORYD_SEARCH_DEPTH"]["value"] == 222
    # The environment still wins over a named file.
    rows = by_name(config_json("--env-file", str(other), cwd=here,
                               env={"MEMORYD_SEARCH_DEPTH": "333"}))
    assert rows["MEMORYD_SEARCH_DEPTH"] == {"name": "MEMORYD_SEARCH_DEPTH", "value": 333,
                                            "source": "env"}

    # /dev/null: no file at all, not even ./.env.
    report = config_json("--env-file", os.devnull, cwd=here)
    assert report["env_file"] is None
    assert by_name(report)["MEMORYD_SEARCH_DEPTH"]["source"] == "default"

    missing = memoryd("--env-file", str(tmp_path / "nope.env"), "config", cwd=here)
    assert missing.returncode == 2 and "nope.env: no such file" in missing.stdout
    named = memoryd("status", cwd=here, env={"MEMORYD_ENV_FILE": str(tmp_path / "gone")})
    assert named.returncode == 2 and "MEMORYD_ENV_FILE names" in named.stdout
    assert "Traceback" not in named.stdout + named.stderr


def test_a_bad_value_in_the_file_is_named_with_the_file(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("MEMORYD_E5_ENGINE=fastest\n", encoding="utf-8")
    done = memoryd("config", cwd=tmp_path)
    assert done.returncode == 2
    assert f"invalid setting MEMORYD_E5_ENGINE (from {tmp_path / '.env'})" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_settings_read_the_dotenv_file_in_process(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("MEMORYD_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    assert Settings().search_depth == 100
    (tmp_path / ".env").write_text("memoryd_search_depth=120\nMEMORYD_RERANK_DEPTH=7\n",
                                   encoding="utf-8")
    monkeypatch.setenv("MEMORYD_RERANK_DEPTH", "9")
    settings = Settings()
    assert (settings.search_depth, settings.rerank_depth) == (120, 9)
    sources = {row.name: row.source for row in describe(settings, options={"port"})}
    assert sources["search_depth"] == str(tmp_path / ".env")
    assert sources["rerank_depth"] == "env"
    assert sources["port"] == "option" and sources["collection"] == "default"


def test_the_cli_reads_url_and_key_from_the_dotenv_file(base_url: str, user: str,
                                                        tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(f"MEMORYD_URL={base_url}\nMEMORYD_API_KEY={KEY_A}\n",
                                   encoding="utf-8")
    added = memoryd("add", user, "Keeps bees on the roof", cwd=tmp_path)
    assert added.returncode == 0, added.stdout + added.stderr
    assert added.stdout.startswith("added: ")
    listed = memoryd("list", user, "--json", cwd=tmp_path)
    assert [m["content"] for m in json.loads(listed.stdout)["items"]] == [
        "Keeps bees on the roof"]
    # The environment wins over the file here too: a wrong key in it is refused.
    denied = memoryd("list", user, cwd=tmp_path, env={"MEMORYD_API_KEY": "not-a-key"})
    assert denied.returncode == 1 and "API key was refused" in denied.stderr


def test_version() -> None:
    done = memoryd("--version", cwd=ROOT)
    assert done.returncode == 0, done.stderr
    name, version = done.stdout.split()
    assert name == "memoryd" and version[0].isdigit()


def _pty_run(args: list[str], env: dict[str, str], until: str, timeout_s: float = 180
             ) -> tuple[subprocess.Popen[bytes], str]:
    """Start `memoryd <args>` with stdout and stderr on a pseudo-terminal, as in a user's
    terminal; read until `until` appears."""
    master, slave = pty.openpty()
    values = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    values["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    values.update(env)
    proc = subprocess.Popen([sys.executable, "-m", "memoryd.workers.cli", *args],
                            stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=values,
                            close_fds=True)
    os.close(slave)
    text = ""
    deadline = time.monotonic() + timeout_s
    while until not in text and time.monotonic() < deadline and proc.poll() is None:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                text += plain(os.read(master, 65536).decode("utf-8", "replace"))
            except OSError:
                break
    os.close(master)
    return proc, text


def test_up_on_a_terminal_prints_readable_log_lines(redis_server: str, tmp_path: Path) -> None:
    port = free_port()
    env = {"MEMORYD_REDIS_URL": redis_db_url(redis_server, 4), "MEMORYD_START_REDIS": "false",
           "MEMORYD_API_KEYS": f"{KEY_A}=tenant-a"}
    proc, text = _pty_run(["up", "--port", str(port), "--data-dir", str(tmp_path)], env,
                          until="Uvicorn running")
    try:
        assert f"memoryd is up at http://127.0.0.1:{port}" in text, text
        logs = [line for line in text.splitlines() if "uvicorn.error" in line]
        assert logs, text
        # structlog's console renderer: `<time> [info     ] <event> [logger]`, not JSON.
        assert not any(line.lstrip().startswith("{") for line in text.splitlines()), text
        assert any("[info" in line and "Uvicorn running" in line for line in logs), text
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _on_terminal(command: list[str], env: dict[str, str]) -> str:
    """Run `command` to its end with stdout and stderr on a pseudo-terminal; its output."""
    master, slave = pty.openpty()
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                             env=env)
    os.close(slave)
    text = b""
    while True:
        try:
            chunk = os.read(master, 65536)  # EIO once the child and its terminal are gone
        except OSError:
            break
        if not chunk:
            break
        text += chunk
    child.wait(60)
    os.close(master)
    return plain(text.decode("utf-8", "replace"))


@pytest.mark.parametrize(("fmt", "on_tty", "as_json"), [
    ("auto", False, True), ("console", False, False), ("json", True, True),
    ("auto", True, False)])
def test_log_format_setting(fmt: str, on_tty: bool, as_json: bool) -> None:
    """MEMORYD_LOG_FORMAT: auto is JSON off a terminal and readable lines on one; json and
    console hold either way. The same call `memoryd up`, `serve` and `worker` make."""
    script = ("from memoryd.platform.logs import configure_logging, get_logger\n"
              "from memoryd.platform.settings import Settings\n"
              "s = Settings()\n"
              "configure_logging(s.log_level, s.log_json_choice)\n"
              "get_logger('memoryd.test').info('hello_log', n=1)\n")
    values = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    values.update(MEMORYD_LOG_FORMAT=fmt, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-c", script]
    if on_tty:
        text = _on_terminal(command, values)
    else:
        text = subprocess.run(command, env=values, capture_output=True, text=True,
                              timeout=60).stderr
    line = next(line for line in text.splitlines() if "hello_log" in line)
    if as_json:
        assert json.loads(line)["event"] == "hello_log"
    else:
        assert not line.lstrip().startswith("{") and "n=" in line, line

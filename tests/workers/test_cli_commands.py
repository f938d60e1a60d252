"""The operator commands against the live gateway, as a user types them (typer's runner),
including the messages for a stack that is down, a wrong key and a bad file."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from conftest import KEY_A
from typer.testing import CliRunner

from shared.platform.redis_runtime import free_port
from workers.cli import app
from workers.cli_ops import Checkpoint, read_import_file

Invoke = Callable[..., Result]


@pytest.fixture()
def run(base_url: str) -> Invoke:
    runner = CliRunner()

    def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
        return runner.invoke(app, [*args], env={"MEMORYD_URL": base_url,
                                                "MEMORYD_API_KEY": KEY_A, **(env or {})})
    return invoke


def ok(result: Result) -> str:
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    return result.output


def test_add_search_list_forget(run: Invoke, user: str) -> None:
    assert "added:" in ok(run("add", user, "我女儿叫 Mia, she is 7", "--tag", "family"))
    assert "already known" in ok(run("add", user, "我女儿叫 Mia, she is 7"))
    found = json.loads(ok(run("search", user, "孩子叫什么名字", "--json")))
    memory_id = found["results"][0]["memory"]["id"]
    assert "Mia" in found["results"][0]["memory"]["content"]
    assert "Mia" in ok(run("search", user, "daughter"))
    listed = json.loads(ok(run("list", user, "--json", "--tag", "family")))
    assert [m["id"] for m in listed["items"]] == [memory_id]
    assert "forgotten: 1" in ok(run("forget", user, memory_id))
    assert "no memories" in ok(run("list", user))
    usage = run("forget", user)
    assert usage.exit_code == 2 and "--thread" in usage.output


def test_export_import_resume(run: Invoke, user: str, tmp_path: Path) -> None:
    for text in ("Likes hiking", "喜欢喝乌龙茶", "Works at a bakery", "Has a cat named Miso"):
        ok(run("add", user, text))
    dump = tmp_path / "dump.jsonl"
    assert "exported 4 memories" in ok(run("export", user, "--out", str(dump)))
    lines = dump.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4 and all(json.loads(line)["source"] == "explicit" for line in lines)

    target = f"{user}-restored"
    # A run that stopped after its first batch (lines 1-2) left this checkpoint behind.
    checkpoint = tmp_path / "dump.jsonl.checkpoint"
    Checkpoint(checkpoint, read_import_file(dump).digest, target, line=2).save()
    resumed = ok(run("import", target, str(dump), "--batch", "2"))
    assert "resuming after line 2" in resumed and "imported 2 records in 1 batches" in resumed
    restored = json.loads(ok(run("list", target, "--json")))["items"]
    assert sorted(m["content"] for m in restored) == sorted(
        json.loads(line)["content"] for line in lines[2:])
    assert all(m["source"] == "import" for m in restored)
    assert json.loads(checkpoint.read_text())["done"] is True
    assert "already imported" in ok(run("import", target, str(dump)))

    again = ok(run("import", target, str(dump), "--restart"))
    assert "imported 4 records" in again and "2 added, 0 updated, 2 duplicate" in again
    assert len(json.loads(ok(run("list", target, "--json")))["items"]) == 4


def test_bad_file_names_line_and_reason(run: Invoke, user: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"content": "fine"}\n\n{"content": "x", "importance": 42}\n',
                   encoding="utf-8")
    result = run("import", user, str(bad))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"{bad}:3: importance:" in result.output
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"content": "fine"}\n{"content": \n', encoding="utf-8")
    assert f"{broken}:2: not valid JSON" in run("import", user, str(broken)).output
    missing = run("import", user, str(tmp_path / "nope.jsonl"))
    assert missing.exit_code == 1 and "cannot read" in missing.output
    assert "no memories" in ok(run("list", user))


def test_stack_down_and_wrong_key_are_clear(run: Invoke, user: str) -> None:
    down = run("search", user, "tea", "--url", f"http://127.0.0.1:{free_port()}")
    assert down.exit_code == 1 and "Traceback" not in down.output
    assert "is not reachable" in down.output and "memoryd up" in down.output
    denied = run("list", user, "--key", "not-a-key")
    assert denied.exit_code == 1 and "API key was refused" in denied.output
    assert "--key / MEMORYD_API_KEY" in denied.output


def test_key_from_the_data_dir(base_url: str, user: str, tmp_path: Path) -> None:
    (tmp_path / "api-key").write_text(KEY_A + "\n")
    result = CliRunner().invoke(app, ["list", user, "--data-dir", str(tmp_path)],
                                env={"MEMORYD_URL": base_url, "MEMORYD_API_KEY": None})
    assert result.exit_code == 0, result.output
    empty = CliRunner().invoke(app, ["list", user, "--data-dir", str(tmp_path / "none")],
                               env={"MEMORYD_URL": base_url, "MEMORYD_API_KEY": None})
    assert empty.exit_code == 1 and "give --key or set MEMORYD_API_KEY" in empty.output


def test_status_history_reindex(run: Invoke, user: str, stack: Any) -> None:
    status = ok(run("status"))
    assert "ready" in status and "redis: ok" in status and "API key: accepted" in status
    assert "memory" in status and "llm" in status and "failed jobs:" in status
    memory_id = ok(run("add", user, "I swim on Tuesdays")).strip().split(": ")[-1]
    history = json.loads(ok(run("history", user, memory_id)))
    assert history["memory_id"] == memory_id
    assert [e["event"] for e in history["events"]] == ["ADD"]
    assert history["events"][0]["after"] == "I swim on Tuesdays"
    unknown = run("history", user, "00000000-0000-0000-0000-000000000000")
    assert unknown.exit_code == 1 and "not_found" in unknown.output
    # A real re-embedding would switch the shared session stack's model under the other
    # tests: the success path runs on its own stack in tests/api/test_reindex.py.
    operator_key = stack.settings.operator_key_file.read_text().strip()
    reindex = run("reindex", "--embedder", "no-such-model",
                  env={"MEMORYD_OPERATOR_KEY": operator_key})
    assert reindex.exit_code == 1 and "Traceback" not in reindex.output
    assert "embedder_not_allowed" in reindex.output and "(field embedder)" in reindex.output
    # Store-wide: a tenant's key is refused, and a missing operator key is named.
    tenant = run("reindex", "--embedder", "e5-small", "--key", KEY_A)
    assert tenant.exit_code == 1 and "forbidden" in tenant.output
    assert "operator key" in tenant.output


def test_bench_runs_the_benchmark_script() -> None:
    # Options pass through to `python -m ops.bench`; a bad one is its error, not the CLI's. (The
    # benchmark itself takes minutes: tests/ops/test_bench_smoke.py runs it.)
    done = subprocess.run([sys.executable, "-m", "workers.cli", "bench", "--phases", "nonsense"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "ops.bench: error: --phases: unknown ['nonsense']" in done.stderr


def test_a_bad_setting_is_named_not_a_traceback(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["up", "--data-dir", str(tmp_path)],
                                env={"MEMORYD_E5_ENGINE": "fastest"})
    assert result.exit_code == 2, result.output
    assert "invalid setting MEMORYD_E5_ENGINE" in result.output, result.output
    assert "'native' or 'prebuilt'" in result.output, result.output
    assert "Traceback" not in result.output
    assert not any(tmp_path.iterdir()), "nothing may be started or written"

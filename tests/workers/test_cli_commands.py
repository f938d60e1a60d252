"""The operator commands against the live gateway, as a user types them (typer's runner),
including the messages for a stack that is down, a wrong key and a bad file."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from conftest import KEY_A
from typer.testing import CliRunner

from memoryd.platform.redis_runtime import free_port
from memoryd.workers.cli import app
from memoryd.workers.cli_ops import Checkpoint, read_import_file

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
    # One message, sent before any request, naming every place it looked.
    assert empty.exit_code == 1 and "Traceback" not in empty.output
    message = " ".join(empty.output.split())
    assert message.count("Pass --key or set MEMORYD_API_KEY") == 1, message
    assert "refused" not in message
    assert ("no API key found; looked at: --key, MEMORYD_API_KEY in the environment, "
            "a .env file here (there is none), "
            f"{tmp_path / 'none' / 'api-key'} (no such file)") in message, message
    # status still reports on the stack, and says the key is missing.
    status = CliRunner().invoke(app, ["status", "--data-dir", str(tmp_path / "none")],
                                env={"MEMORYD_URL": base_url, "MEMORYD_API_KEY": None})
    assert status.exit_code == 0, status.output
    assert "ready" in status.output and "API key: none (no API key found" in status.output


def test_status_history_reindex(run: Invoke, user: str, stack: Any) -> None:
    status = ok(run("status"))
    assert "ready" in status and "redis: ok" in status and "API key: accepted" in status
    assert "memory" in status and "llm" in status and "failed jobs:" in status
    memory_id = ok(run("add", user, "I swim on Tuesdays")).strip().split(": ")[-1]
    history = json.loads(ok(run("history", user, memory_id, "--json")))
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
    done = subprocess.run(
        [sys.executable, "-m", "memoryd.workers.cli", "bench", "--phases", "nonsense"],
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


def _table_ids(output: str) -> list[str]:
    """The id column of a memory table (the first column, or the second after a score)."""
    ids = []
    for line in output.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells and cells[0] and cells[0] != "id":
            ids.append(cells[1] if "." in cells[0] else cells[0])
    return [i for i in ids if i]


def test_short_ids_in_80_columns_and_every_command_takes_them(run: Invoke, user: str) -> None:
    narrow = {"COLUMNS": "80"}
    first = ok(run("add", user, "My sister Ana lives in Lisbon and teaches piano to children"))
    ok(run("add", user, "Allergic to peanuts"))
    listed = json.loads(ok(run("list", user, "--json")))["items"]
    full = {m["content"]: m["id"] for m in listed}
    assert first.strip() == f"added: {full[listed[-1]['content']]}"
    table = ok(run("list", user, env=narrow))
    assert all(len(line) <= 80 for line in table.splitlines()), table
    shown = _table_ids(table)
    # One row per memory (a wrapped id would leave its pieces on later lines), each id whole
    # on its line and the start of the full id.
    assert len(shown) == len(listed) and all(len(i) == 8 for i in shown), table
    assert sorted(shown) == sorted(i[:8] for i in full.values())
    found = _table_ids(ok(run("search", user, "peanut allergy", env=narrow)))
    assert full["Allergic to peanuts"][:8] in found

    short = full["Allergic to peanuts"][:8]
    history = ok(run("history", user, short, env=narrow))
    assert f"memory {short}" in history and "ADD" in history and "Allergic to" in history
    assert all(len(line) <= 80 for line in history.splitlines()), history
    as_json = json.loads(ok(run("history", user, short[:5], "--json")))
    assert as_json["memory_id"] == full["Allergic to peanuts"]
    assert "forgotten: 1" in ok(run("forget", user, short))
    assert [m["content"] for m in json.loads(ok(run("list", user, "--json")))["items"]] == [
        listed[-1]["content"]]

    unknown = run("history", user, "ffff0000")
    assert unknown.exit_code == 1 and "no memory of user" in unknown.output
    assert "starting with 'ffff0000'" in unknown.output
    too_short = run("forget", user, "ab")
    assert too_short.exit_code == 1 and "at least its first 4 characters" in too_short.output


def test_an_ambiguous_prefix_is_refused_and_names_the_candidates(run: Invoke, user: str) -> None:
    from memoryd.records.identity import content_hash, memory_id

    ok(run("add", user, "likes tea number 0"))
    view = json.loads(ok(run("list", user, "--json")))["items"][0]

    def predicted(text: str) -> str:  # the id the write path gives this content
        return memory_id("tenant-a", user, view["scope"], view["project"], content_hash(text))

    assert predicted("likes tea number 0") == view["id"]
    # Two more contents whose ids share their first four characters (a birthday search
    # over 65,536 prefixes: a few hundred candidates suffice).
    seen: dict[str, str] = {}
    pair: tuple[str, str] | None = None
    for n in range(1, 20000):
        text = f"likes tea number {n}"
        prefix = predicted(text)[:4]
        if prefix in seen:
            pair = (seen[prefix], text)
            break
        seen[prefix] = text
    assert pair is not None
    for text in pair:
        ok(run("add", user, text))
    prefix = predicted(pair[0])[:4]
    ambiguous = run("forget", user, prefix)
    assert ambiguous.exit_code == 1, ambiguous.output
    message = " ".join(ambiguous.output.split())
    assert f"the id prefix '{prefix}' is ambiguous: 2 memories" in message, message
    assert predicted(pair[0])[:8] in message and predicted(pair[1])[:8] in message
    assert len(json.loads(ok(run("list", user, "--json")))["items"]) == 3  # nothing forgotten
    # Each of them, with the characters that tell them apart.
    assert "forgotten: 1" in ok(run("forget", user, predicted(pair[0])[:8]))


def test_json_everywhere_and_version(run: Invoke, user: str) -> None:
    added = json.loads(ok(run("add", user, "Plays the cello", "--json")))
    assert added["outcome"] == "added" and len(added["memory"]["id"]) == 36
    status = json.loads(ok(run("status", "--json")))
    assert status["status"] == "ready" and status["api_key"] == "accepted"
    assert set(status["queues"]) >= {"memory", "llm", "bulk"}
    forgotten = json.loads(ok(run("forget", user, added["memory"]["id"], "--json")))
    assert forgotten["deleted"] == 1
    version = ok(run("--version"))
    assert version.startswith("memoryd ") and version.split()[1][0].isdigit()


def test_status_names_a_message_held_for_its_countdown(run: Invoke, stack: Any) -> None:
    """The `(delivered, not acked) 1` of an idle stack: a task sent with a countdown (here the
    access-count flush a search schedules, as the gateway sends it) is taken by the worker
    at once and held, unacknowledged, until it is due. status names it."""
    import httpx

    from memoryd.retrieval.access import schedule_flush

    schedule_flush(stack.runtime.celery, 30.0)
    metrics = ""
    for _ in range(100):
        metrics = httpx.get(f"{run_base(stack)}/metrics", timeout=10).text
        if 'memoryd_tasks_scheduled{task="memory.flush_access"} 1.0' in metrics:
            break
        time.sleep(0.1)
    assert 'memoryd_tasks_scheduled{task="memory.flush_access"} 1.0' in metrics, metrics
    # The stack is the session's: another test's webhook delivery may be held for its
    # retry's countdown beside it, and is named on a line of its own.
    status = ok(run("status", env={"COLUMNS": "100"}))
    held = [line for line in status.splitlines()
            if "held for a countdown" in line and "memory.flush_access" in line]
    assert len(held) == 1 and "│ 1" in held[0], status
    assert json.loads(ok(run("status", "--json")))["scheduled"]["memory.flush_access"] == 1


def run_base(stack: Any) -> str:
    return f"http://127.0.0.1:{stack.settings.port}"

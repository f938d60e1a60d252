"""Logged exceptions keep their type and frames, never their message or arguments (issue 31,
item 7): a process configured as every memoryd process is (`configure_logging`) logs, through
structlog and through a stdlib logger as Celery does, exceptions raised over memory text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent('''
    import logging
    from memoryd.platform.errors import InvalidInput
    from memoryd.platform.logs import configure_logging, get_logger

    configure_logging("INFO", json=True)
    log = get_logger("memoryd.test")
    celery = logging.getLogger("celery.app.trace")
    text = "SECRETMARK my diary \\ud800 entry"

    def encode(value):
        return value.encode("utf-8")

    try:
        encode(text)
    except UnicodeEncodeError as exc:
        log.exception("unhandled_error")
        # Celery's own record: the exception's repr in the message, the traceback attached.
        celery.error("Task %(name)s[%(id)s] raised unexpected: %(exc)s",
                     {"name": "memory.save", "id": "1", "exc": repr(exc)}, exc_info=True)
        log.error("task_failed", error=str(exc), exc_info=True)
    try:
        try:
            {}["SECRETMARK as a key"]
        except KeyError as inner:
            raise ValueError("SECRETMARK in a value: " + text[:10]) from inner
    except ValueError:
        log.exception("chained")
    try:
        raise ConnectionError("redis at 127.0.0.1:6379 refused the connection")
    except ConnectionError:
        log.exception("redis_down")
    try:
        raise InvalidInput("content: must not be empty", field="content")
    except InvalidInput:
        log.exception("app_error")
''')


def test_exceptions_are_logged_without_their_text() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    records = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    events = {r["event"] if r["logger"] != "celery.app.trace" else "celery": r for r in records}
    assert set(events) == {"unhandled_error", "celery", "task_failed", "chained", "redis_down",
                           "app_error"}, done.stderr
    assert "SECRETMARK" not in done.stderr
    assert "diary" not in done.stderr

    unhandled = events["unhandled_error"]["exception"]
    # The frames stay: where it failed is what an operator needs.
    assert unhandled.startswith("Traceback (most recent call last):")
    assert 'line' in unhandled and "in encode" in unhandled
    assert unhandled.endswith("UnicodeEncodeError (message withheld: it may quote request text)")
    assert events["celery"]["event"] == "Task memory.save[1] raised unexpected: <withheld>"
    assert "UnicodeEncodeError" in events["celery"]["exception"]
    chained = events["chained"]["exception"]
    assert "KeyError (message withheld" in chained and "ValueError (message withheld" in chained
    # Messages about the connection, and memoryd's own (written to name fields), stay.
    assert "refused the connection" in events["redis_down"]["exception"]
    assert "content: must not be empty" in events["app_error"]["exception"]


WARNING_SCRIPT = textwrap.dedent('''
    from qdrant_client import QdrantClient
    from qdrant_client import models as qm
    from memoryd.platform.logs import configure_logging

    configure_logging("INFO", json=True)
    # qdrant-client's local mode warns that a payload index has no effect there.
    client = QdrantClient(":memory:")
    client.create_collection("c", vectors_config=qm.VectorParams(size=2,
                                                                distance=qm.Distance.COSINE))
    client.create_payload_index("c", "f", qm.PayloadSchemaType.KEYWORD)
''')


def test_a_librarys_warning_is_logged_in_the_services_format() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", WARNING_SCRIPT], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines, "qdrant-client's local mode warned nothing"
    records = [json.loads(line) for line in lines]  # every line is a JSON record
    warned = [r for r in records if r["logger"] == "py.warnings"]
    assert warned and warned[0]["level"] == "warning", done.stderr
    assert "Payload indexes have no effect" in warned[0]["event"]

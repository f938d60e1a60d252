"""The erasure drill reads the compaction's own run time from the stack's log, in either
log format, so it can hold "forget to erased" to the bound docs/erasure.md states."""

from __future__ import annotations

from ops.chaos.erasure import compaction_seconds


def test_the_last_compaction_line_gives_its_seconds() -> None:
    log = "\n".join([
        '{"event": "erasure_compacted", "forgets": 1, "seconds": 1.25, "redis": {}}',
        '{"event": "search", "seconds": 9.0}',
        "2026-12-03 10:00:00 [info] erasure_compacted forgets=2 seconds=3.5 unreadable=1",
    ])
    assert compaction_seconds(log) == 3.5
    assert compaction_seconds(log.splitlines()[0]) == 1.25
    assert compaction_seconds('{"event": "search", "seconds": 9.0}') == 0.0

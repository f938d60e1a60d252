"""Server mode with the Qdrant server gone: enqueue 202, search 503 `store_unavailable`,
jobs retry and succeed once it answers again (qdrant-client over real HTTP, see
tests/support/qdrant_rest_facade.py for what stands in for the server)."""

from __future__ import annotations

from pathlib import Path

from ops.chaos.server import store_unreachable


def test_store_down_then_back(tmp_path: Path) -> None:
    # task_max_retries 0: only the budget for unavailable dependencies keeps the jobs alive.
    row = store_unreachable(tmp_path, n=4, outage_s=1.0, task_max_retries=0)
    assert (row.expected, row.found, row.duplicates, row.lost) == (4, 4, 0, 0), row

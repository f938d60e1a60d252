"""The hostile-tenant scenario at a small size: one tenant's hostile text at full message size
through the API loses nothing of another tenant's, and every job of both succeeds at its
first attempt within the task time limit. (The p99 bound is checked by `python -m ops.chaos
--only hostile-tenant`, where timing belongs.)"""

from __future__ import annotations

from pathlib import Path

from ops.chaos.hostile import hostile_tenant


def test_hostile_tenant_costs_the_neighbour_nothing(tmp_path: Path) -> None:
    row = hostile_tenant(tmp_path, messages=4, shapes=6, searches=20, writes=4, rounds=1,
                         p99_factor=None)
    assert row.expected > 0
    assert (row.found, row.duplicates, row.lost) == (row.expected, 0, 0), row

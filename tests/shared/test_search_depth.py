"""How deep each ranked list goes (`MEMORYD_SEARCH_DEPTH`, shared/reads.list_depth)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from memoryd.memories.reads import list_depth
from memoryd.platform.settings import Settings


def test_the_default_is_the_depth_measured_for_recall() -> None:
    # 100 deep at top_k 10 and below, 10 x top_k above (docs/retrieval.md).
    assert [list_depth(100, k) for k in (1, 5, 10, 11, 50, 100)] == [
        100, 100, 100, 110, 500, 1000]


@pytest.mark.parametrize("depth", [10, 30, 50, 100, 1000])
def test_a_page_is_never_deeper_than_its_lists(depth: int) -> None:
    depths = [list_depth(depth, top_k) for top_k in range(1, 101)]  # the API's top_k range
    assert all(d >= top_k for top_k, d in enumerate(depths, start=1))
    assert depths[:10] == [depth] * 10  # the setting itself up to top_k 10
    assert depths == sorted(depths)  # a larger page never gets shallower lists


@pytest.mark.parametrize("value", ["9", "0", "-5", "1001", "deep"])
def test_a_depth_out_of_range_is_refused_by_name(
    value: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMORYD_SEARCH_DEPTH", value)
    with pytest.raises(ValidationError, match="search_depth"):
        Settings()


def test_the_setting_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORYD_SEARCH_DEPTH", "50")
    assert Settings().search_depth == 50

"""The cross-lingual keyword bridge (shared/retrieval/bridge.py) through the real stack:
a Chinese question finds an English memory by keyword and the reverse, and a user whose
memories are all in the query's language gets the same results and scores with it as
without it (`MEMORYD_SEARCH_BRIDGE`).

Two gateways over the session stack's store, one with the bridge and one without, neither
counting access (a search's access counts would move the next search's scores); every
search gives `as_of`, so recency is the same for both."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conftest import KEY_A
from helpers import save, search
from live_gateway import gateway, settings_with

from memoryd.retrieval.bridge import bridged_terms
from memoryd.retrieval.keywords import BRIDGE_WEIGHT, tokenize

AS_OF = "2024-06-01T00:00:00Z"

ENGLISH = (
    "Bart flew a kite at the beach and felt really happy.",
    "Lisa's teacher praised her in class for answering questions.",
    "Tom adopted a cat from the animal shelter last spring.",
    "The doctor told Tom to run three times a week.",
    "Bart danced at the Christmas party with his friends.",
)
CHINESE = (
    "Bart在海边放风筝，感觉非常开心。",
    "老师在课上表扬了Lisa，因为她积极回答问题。",
    "Tom去年春天从动物收容所领养了一只猫。",
    "医生让Tom每周跑步三次。",
    "Bart和朋友们在圣诞晚会上跳舞。",
)
ENGLISH_QUERIES = ("When did Bart fly a kite?", "who praised Lisa in class",
                   "Tom cat shelter", "what did the doctor say about running",
                   "Christmas party dance with friends")
CHINESE_QUERIES = ("Bart什么时候放风筝？", "老师为什么表扬Lisa", "Tom领养的猫",
                   "医生说跑步的事", "圣诞晚会跳舞")


@pytest.fixture(scope="module")
def gateways(stack: Any) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    quiet = {"search_record_access": False}
    with gateway(settings_with(stack, search_bridge=True, **quiet), stack.runtime.index) as on, \
            gateway(settings_with(stack, search_bridge=False, **quiet),
                    stack.runtime.index) as off, \
            httpx.Client(base_url=on, headers={"Authorization": f"Bearer {KEY_A}"},
                         timeout=30.0) as with_bridge, \
            httpx.Client(base_url=off, headers={"Authorization": f"Bearer {KEY_A}"},
                         timeout=30.0) as without:
        yield with_bridge, without


def store(api: httpx.Client, user: str, contents: tuple[str, ...]) -> None:
    for i, content in enumerate(contents):
        response = save(api, user, content, occurred_at=f"2024-{i + 1:02d}-10T10:00:00Z")
        assert response.status_code == 201, response.text


def hits(client: httpx.Client, user: str, query: str, mode: str) -> list[tuple[str, float]]:
    return [(h["memory"]["content"], h["score"])
            for h in search(client, user, query, mode=mode, as_of=AS_OF, top_k=5)]


@pytest.mark.parametrize(("memories", "queries"), [(ENGLISH, ENGLISH_QUERIES),
                                                   (CHINESE, CHINESE_QUERIES)],
                         ids=["english", "chinese"])
def test_one_language_searches_are_unchanged_by_the_bridge(
    api: httpx.Client, user: str, gateways: tuple[httpx.Client, httpx.Client],
    memories: tuple[str, ...], queries: tuple[str, ...],
) -> None:
    with_bridge, without = gateways
    store(api, user, memories)
    for query in queries:
        # Each query brings bridged terms, so the equality below is the bridge's doing.
        assert bridged_terms(tokenize(query)), query
        for mode in ("keyword", "hybrid"):
            bridged = search(with_bridge, user, query, mode=mode, as_of=AS_OF, explain=True)
            plain = search(without, user, query, mode=mode, as_of=AS_OF, explain=True)
            assert bridged, (query, mode)
            assert [(h["memory"]["id"], h["score"], h["explanation"]) for h in bridged] == [
                (h["memory"]["id"], h["score"], h["explanation"]) for h in plain], (query, mode)


@pytest.mark.parametrize(("memories", "query", "expected", "exact"), [
    (ENGLISH, "我喜欢放风筝", ENGLISH[0], "kite"),
    (ENGLISH, "医生说什么", ENGLISH[3], "doctor"),
    (CHINESE, "my cat", CHINESE[2], "猫"),
    (CHINESE, "the doctor", CHINESE[3], "医生"),
], ids=["zh-kite", "zh-doctor", "en-cat", "en-doctor"])
def test_a_question_finds_a_memory_in_the_other_language_by_keyword(
    api: httpx.Client, user: str, gateways: tuple[httpx.Client, httpx.Client],
    memories: tuple[str, ...], query: str, expected: str, exact: str,
) -> None:
    with_bridge, without = gateways
    store(api, user, memories)
    assert hits(without, user, query, "keyword") == []  # no word in common
    found = hits(with_bridge, user, query, "keyword")
    assert found and found[0][0] == expected
    # The store finds the translation at half the weight of the memory's own word, and
    # the score reads it at the scale of an exact match: labelled as the word would be.
    bridged = search(with_bridge, user, query, mode="keyword", as_of=AS_OF, explain=True)[0]
    own = search(with_bridge, user, exact, mode="keyword", as_of=AS_OF, explain=True)[0]
    assert own["memory"]["content"] == expected
    assert bridged["explanation"]["keyword"] == pytest.approx(
        BRIDGE_WEIGHT * own["explanation"]["keyword"], rel=1e-4)
    assert bridged["score"] == pytest.approx(own["score"], abs=1e-4)


def test_an_english_question_reads_chinese_memories_in_chinese_too(
    api: httpx.Client, user: str, gateways: tuple[httpx.Client, httpx.Client],
) -> None:
    # Decision 0041: an English query's words put into Chinese are a second dense reading,
    # scored against the user's Chinese memories only; English memories keep their cosine.
    with_bridge, without = gateways
    store(api, user, CHINESE + ENGLISH)
    for query, expected in zip(ENGLISH_QUERIES, CHINESE, strict=True):
        read = search(with_bridge, user, query, mode="dense", as_of=AS_OF, explain=True,
                      top_k=10)
        plain = search(without, user, query, mode="dense", as_of=AS_OF, explain=True,
                       top_k=10)
        chinese_hits = [h for h in read if h["memory"]["content"] in CHINESE]
        assert len(chinese_hits) == len(CHINESE), query
        assert all(h["explanation"]["bridged"] is not None for h in chinese_hits), query
        assert all(h["explanation"]["bridged"] is None for h in read
                   if h["memory"]["content"] in ENGLISH), query
        assert all(h["explanation"]["bridged"] is None for h in plain), query
        # The store's cosine of the English text is the same either way: only the score
        # reads the second one.
        cosine = {h["memory"]["id"]: h["explanation"]["dense"] for h in plain}
        assert all(h["explanation"]["dense"] == pytest.approx(cosine[h["memory"]["id"]])
                   for h in read), query
        ranked = [h["memory"]["content"] for h in read if h["memory"]["content"] in CHINESE]
        assert ranked[0] == expected, (query, ranked)


def test_an_english_only_user_is_searched_as_without_the_bridged_reading(
    api: httpx.Client, user: str, gateways: tuple[httpx.Client, httpx.Client],
) -> None:
    with_bridge, without = gateways
    store(api, user, ENGLISH)
    for query in ENGLISH_QUERIES:
        read = search(with_bridge, user, query, mode="dense", as_of=AS_OF, explain=True)
        plain = search(without, user, query, mode="dense", as_of=AS_OF, explain=True)
        assert read and [(h["memory"]["id"], h["score"], h["explanation"]) for h in read] == [
            (h["memory"]["id"], h["score"], h["explanation"]) for h in plain], query

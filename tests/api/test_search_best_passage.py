"""A long memory is ranked in the keyword list by its single best passage, through the real
stack: a long reply that mentions a question's words in different passages no longer
outranks the short turn that holds them all (docs/decisions/0031-keywords-by-best-passage.md).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from helpers import save, search, wait_job

from memoryd.embeddings.parts import split_parts
from memoryd.records.models import Owner
from memoryd.retrieval.keywords import (
    PASSAGES_FIELD,
    best_passage_score,
    keyword_vector,
    passage_weights,
    query_keyword_vector,
    stored_passage_weights,
)

AS_OF = "2024-06-01T00:00:00Z"
FILLER = ("We talked for a while about the weather, the traffic on the way home and what "
          "to cook for dinner, and nothing much else happened that afternoon. ")
LONG = (FILLER * 3 + "Your guitar teacher sounds patient. " + FILLER * 3
        + "Practising scales every evening helps. " + FILLER * 3
        + "A second-hand Yamaha is a good first instrument. " + FILLER * 3).strip()
SHORT = "I practise guitar scales every evening on my Yamaha."
QUERY = "guitar scales Yamaha evening"


def test_a_short_turn_holding_every_word_outranks_a_long_reply_scattering_them(
    api: httpx.Client, user: str,
) -> None:
    assert len(split_parts(LONG)) > 3 and len(split_parts(SHORT)) == 1
    for content, day in ((LONG, 10), (SHORT, 11)):
        response = save(api, user, content, occurred_at=f"2024-05-{day}T10:00:00Z")
        assert response.status_code == 201, response.text
    for mode in ("keyword", "hybrid"):
        found = search(api, user, QUERY, mode=mode, as_of=AS_OF, explain=True)
        assert [h["memory"]["content"] for h in found][:2] == [SHORT, LONG], mode
    long_hit = next(h for h in search(api, user, QUERY, mode="keyword", as_of=AS_OF,
                                      explain=True) if h["memory"]["content"] == LONG)
    # The query's IDF: the reference's, joined by the user's two memories, both of which
    # hold every query word.
    vector = query_keyword_vector(QUERY, own=lambda ids: (2, [2] * len(ids)))
    assert vector is not None
    query = dict(zip(*vector, strict=True))
    best = best_passage_score(query, LONG, scope="t")
    assert best is not None
    assert long_hit["explanation"]["keyword"] == pytest.approx(best, rel=1e-4)
    assert long_hit["explanation"]["keyword_rank"] == 2
    # What the store alone gives it: each word's best weight from any passage, summed.
    stored = keyword_vector(LONG)
    assert stored is not None
    scattered = sum(w * dict(zip(*stored, strict=True)).get(i, 0.0) for i, w in query.items())
    assert scattered > 1.5 * best


WORDS = ("guitar", "scales", "yamaha", "evening", "teacher", "concert", "piano", "lesson")
# Eight long replies about different things, so that none repeats another (a near-copy is
# one memory: the write path merges it).
TOPICS = tuple(f"{t} and nothing else came up for a long while that day. " for t in (
    "We compared train fares to Porto and the cheapest seats on the night bus",
    "The plumber fixed the leaking kitchen tap and replaced two old washers",
    "Grandma's apple crumble needs less sugar and a hotter oven than the card says",
    "The football club elected a new treasurer after the spring meeting",
    "Tax forms for the small rental flat have to be filed before the end of May",
    "The hiking route over the northern ridge is closed after the winter storms",
    "Our neighbours adopted two rescue greyhounds from the shelter near the river",
    "The library extended its opening hours on weekdays during the exam season",
))


def test_the_keyword_head_is_every_memory_scored_by_its_best_passage(
    api: httpx.Client, user: str,
) -> None:
    """Whatever the store's upper bounds, the keyword page is what scoring every memory of
    the user by its best passage gives: the same memories, in the same order, the same
    scores."""
    contents = [f"{WORDS[i % 8]} {WORDS[(3 * i + 1) % 8]} note {i}" for i in range(8)]
    for i, topic in enumerate(TOPICS):  # long: the query's words spread over two passages
        contents.append(topic * 2 + f"{WORDS[i]} and {WORDS[(i + 1) % 8]} again. " + topic * 3
                        + f"{WORDS[(i + 2) % 8]}, {WORDS[(i + 3) % 8]} and "
                        f"{WORDS[(i + 4) % 8]}. " + topic * 2)
    contents = [c.strip() for c in contents]
    imported = api.post("/v1/import", params={"user_id": user},
                        json=[{"content": c} for c in contents])
    assert imported.status_code == 202, imported.text
    assert wait_job(api, imported.json()["job_id"])["status"] == "succeeded"
    query_text = "guitar scales yamaha evening teacher"
    found = search(api, user, query_text, mode="keyword", as_of=AS_OF, explain=True, top_k=10)
    vectors = [keyword_vector(c) for c in contents]
    held = [set(v[0]) if v else set() for v in vectors]

    def own(ids: list[int]) -> tuple[int, list[int]]:
        return len(contents), [sum(i in h for h in held) for i in ids]

    vector = query_keyword_vector(query_text, own=own)
    assert vector is not None
    query = dict(zip(*vector, strict=True))

    def score(content: str, v: tuple[list[int], list[float]] | None) -> float:
        best = best_passage_score(query, content, scope="t")
        if best is not None:
            return best
        weights = dict(zip(*v, strict=True)) if v else {}
        return sum(w * weights.get(i, 0.0) for i, w in query.items())

    expected = sorted(((score(c, v), c) for c, v in zip(contents, vectors, strict=True)
                       if score(c, v) > 0), key=lambda sc: -sc[0])[:10]
    assert any(len(split_parts(c)) > 1 for _, c in expected)  # long ones compete
    assert [h["memory"]["content"] for h in found] == [c for _, c in expected]
    assert [h["explanation"]["keyword"] for h in found] == pytest.approx(
        [s for s, _ in expected], rel=1e-4)


def test_a_long_memory_keeps_its_passages_counts_and_one_read_from_another_text_is_not_used(
    stack: Any, api: httpx.Client, user: str,
) -> None:
    """The keyword head scores a long memory from the passage counts stored with it
    (docs/decisions/0054-passage-keywords-kept-with-the-memory.md): the same weights its
    text gives. Counts whose digest names another text are ignored, and the text is read."""
    saved = save(api, user, LONG, occurred_at="2024-05-10T10:00:00Z")
    assert saved.status_code == 201, saved.text
    mid = saved.json()["memory"]["id"]
    save(api, user, SHORT, occurred_at="2024-05-11T10:00:00Z")
    view = stack.runtime.index.view()
    owner = Owner(tenant_id="tenant-a", user_id=user)
    [point] = view.store.get(owner, [mid])
    field = point.payload[PASSAGES_FIELD]
    assert len(field["passages"]) == len(split_parts(LONG))
    assert stored_passage_weights(field, LONG) == passage_weights(LONG, scope="t")
    assert stored_passage_weights(field, SHORT) is None

    def long_keyword() -> float:
        hits = search(api, user, QUERY, mode="keyword", as_of=AS_OF, explain=True)
        return float(next(h["explanation"]["keyword"] for h in hits
                          if h["memory"]["id"] == mid))

    first = long_keyword()
    # Counts that would score the long memory far higher, under another text's digest.
    inflated = {"of": "0" * 16, "passages": [
        {"ids": p["ids"], "counts": [50] * len(p["ids"]), "tokens": p["tokens"]}
        for p in field["passages"]]}
    view.store.set_payload(owner, [mid], {PASSAGES_FIELD: inflated})
    assert long_keyword() == pytest.approx(first, rel=1e-6)
    # The same counts under the text's own digest are read: the score follows them.
    view.store.set_payload(owner, [mid], {PASSAGES_FIELD: {**inflated, "of": field["of"]}})
    assert long_keyword() > 1.2 * first

"""A long memory is ranked in the keyword list by its single best passage, through the real
stack: a long reply that mentions a question's words in different passages no longer
outranks the short turn that holds them all (docs/decisions/0031-keywords-by-best-passage.md).
"""

from __future__ import annotations

import httpx
import pytest
from helpers import save, search

from memoryd.embeddings.parts import split_parts
from memoryd.retrieval.keywords import best_passage_score, keyword_vector, query_keyword_vector

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
    best = best_passage_score(query, LONG)
    assert best is not None
    assert long_hit["explanation"]["keyword"] == pytest.approx(best, rel=1e-4)
    assert long_hit["explanation"]["keyword_rank"] == 2
    # What the store alone gives it: each word's best weight from any passage, summed.
    stored = keyword_vector(LONG)
    assert stored is not None
    scattered = sum(w * dict(zip(*stored, strict=True)).get(i, 0.0) for i, w in query.items())
    assert scattered > 1.5 * best

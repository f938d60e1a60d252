"""A long memory is searched by its passages, through the real gateway, worker and store:
the passage that answers finds it, an edit that keeps the text keeps its passages, and a
forgotten one is found by none of them."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from helpers import save, search

from memoryd.embeddings.local import E5Embedder
from memoryd.embeddings.parts import embed_memories

CHAT = ("Melanie: The kids wanted pancakes again this morning, so we made a mess of the "
        "kitchen. Caroline: Ha, that sounds like a fun Saturday. Melanie: It was, though "
        "the dog stole two of them off the counter. ")
NECKLACE = "Caroline: My grandmother gave me a silver necklace from Sweden when I was ten. "
LONG = CHAT * 5 + NECKLACE + CHAT * 5
QUESTION = "Who gave Caroline the silver necklace from Sweden?"


def _rank(api: httpx.Client, user: str, memory_id: str) -> tuple[int | None, float | None]:
    """The memory's place in a dense search for QUESTION, and its cosine there."""
    hits = search(api, user, QUESTION, mode="dense", top_k=10, explain=True)
    for i, hit in enumerate(hits):
        if hit["memory"]["id"] == memory_id:
            return i, hit["explanation"]["dense"]
    return None, None


def test_a_long_memory_is_found_by_the_passage_that_answers(api: httpx.Client,
                                                            user: str) -> None:
    saved = save(api, user, LONG)
    assert saved.status_code == 201, saved.text
    long_id = saved.json()["memory"]["id"]
    for text in ("I keep bees on the roof of my building", "My sister lives in Lisbon",
                 "I bought a second-hand cello last winter"):
        assert save(api, user, text).status_code == 201
    rank, cosine = _rank(api, user, long_id)
    assert rank == 0
    # Its dense score is its best passage's (MaxSim), above what its single vector gets.
    e5 = E5Embedder()
    [vectors] = embed_memories(e5, [LONG])
    assert vectors.parts is not None and len(vectors.parts) > 2
    query = e5.embed_query(QUESTION)
    assert cosine == pytest.approx(float(np.max(vectors.parts @ query)), abs=2e-3)
    assert cosine > float(vectors.dense @ query) + 0.01

    # An edit of its tags rewrites the point: the passages must stay with it.
    path = f"/v1/memories/{long_id}"
    edited = api.patch(path, params={"user_id": user, "wait": 10}, json={"tags": ["family"]})
    assert edited.status_code == 200, edited.text
    assert _rank(api, user, long_id) == (0, cosine)

    deleted = api.delete(path, params={"user_id": user, "wait": 10})
    assert deleted.status_code == 200, deleted.text
    assert _rank(api, user, long_id) == (None, None)
    assert api.get(path, params={"user_id": user}).status_code == 404

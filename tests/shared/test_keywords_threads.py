"""Keyword tokens are the same whichever threads compute them at once."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest
import snowballstemmer

from memoryd.retrieval import keywords

# Words that take the stemmer through several suffix steps; the test makes 40 of each with
# a prefix of x's and clears `_stem`'s cache, so every one is stemmed, not looked up.
WORDS = [f"{stem}{suffix}" for stem in ("paint", "generat", "relat", "happi", "nation",
                                        "connect", "argu", "run", "hope")
         for suffix in ("ing", "ed", "ational", "ness", "ization", "fulness", "s", "ies")]


@pytest.fixture
def tiny_switch_interval() -> Iterator[None]:
    # Threads then change hands inside stemWord as often as they can: a stemmer shared by
    # threads fails at once instead of once in a while.
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def test_stems_computed_by_many_threads_match_one_stemmer(tiny_switch_interval: None) -> None:
    reference = snowballstemmer.stemmer("english")
    words = [f"{'x' * n}{w}" for n in range(40) for w in WORDS]
    expected = {w: reference.stemWord(w) for w in words}
    keywords._stem.cache_clear()
    wrong: list[tuple[str, str]] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def stem_all(offset: int) -> None:
        barrier.wait()
        try:
            for word in words[offset:] + words[:offset]:
                stem = keywords._stem(word)
                if stem != expected[word]:
                    wrong.append((word, stem))
        except BaseException as exc:  # collected: an error in a thread must fail the test
            errors.append(exc)

    # Each thread starts at another word, so that several stem the same words at once.
    threads = [threading.Thread(target=stem_all, args=(i * 37,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    keywords._stem.cache_clear()
    assert errors == []
    assert wrong == []

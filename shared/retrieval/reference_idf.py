"""Keyword IDF from a fixed reference that no stored data moves (docs/decisions/0029).

A word's weight in a query is its BM25 IDF in a *reference* corpus: `REFERENCE_DOCS`
short documents of `BM25_AVG_LEN` tokens each, whose words occur at the frequencies of
`wordfreq`'s "large" lists (English for Latin-script words, Chinese for CJK words). The
store's own statistics are not read: with Qdrant's collection-wide IDF one tenant's
memories moved another user's keyword scores (issue 30), and ranking on a shared store
was not what `memoryd eval` reported on an empty one.

A word's reference document frequency, for a word of frequency f per token in documents
of L tokens, is df = 1 - exp(-f·L) (the chance a document holds it at least once); its
IDF is Qdrant's BM25 form over N = `REFERENCE_DOCS` documents, n = df·N:
ln(1 + (N - n + 0.5) / (n + 0.5)): the scale Qdrant's IDF had on a store of a few
thousand memories, now the same for every user and set, on which `Weights.keyword_half`
(11) is where the best keyword hit of a user with the evidence and of one without part
(docs/decisions/0029). A word the table does not hold (a
name, a rare word, a number of two digits or more, which wordfreq only keeps with its
digits smashed) weighs what the table's rarest word weighs.

The table holds only words at least `MIN_FREQUENCY` per token: rarer words' IDF differs
from the rarest's by under 0.05 (n ≪ 0.5), so keeping them would cost memory for nothing.
wordfreq's word lists are CC BY-SA 4.0 data: they are read from the installed `wordfreq`
package at run time, never copied into this code (NOTICE). Nothing is downloaded.
"""

from __future__ import annotations

import math
import threading

from memoryd.retrieval.bm25 import BM25_AVG_LEN

REFERENCE_DOCS = 2000.0
MIN_FREQUENCY = 1e-6
_LANGS = ("en", "zh")
_WORDLIST = "large"  # wordfreq's "best" list for both languages

_lock = threading.Lock()
_table: dict[str, float] | None = None


def bm25_idf(n: float, total: float) -> float:
    """BM25's IDF (Qdrant's form) of a word in `n` of `total` documents."""
    return math.log1p(max(total - n + 0.5, 0.0) / (n + 0.5))


def docs_of_frequency(frequency: float) -> float:
    """How many of the reference corpus's documents hold a word of `frequency` per token."""
    return -math.expm1(-max(frequency, 0.0) * BM25_AVG_LEN) * REFERENCE_DOCS


def idf_of_frequency(frequency: float) -> float:
    """BM25 IDF of a word of `frequency` per token in the reference corpus."""
    return bm25_idf(docs_of_frequency(frequency), REFERENCE_DOCS)


RARE_DOCS = docs_of_frequency(MIN_FREQUENCY)
RARE_IDF = idf_of_frequency(MIN_FREQUENCY)


def _is_cjk(word: str) -> bool:
    return not word[0].isascii()


def _load() -> dict[str, float]:
    """Surface word → reference documents holding it, English and Chinese lists (a CJK
    key can only be Chinese, a Latin one only English: each list keeps its own script)."""
    # Imported on the first keyword query, not at start-up. Read through `read_cBpack`
    # rather than `get_frequency_dict`, which would cache every list whole (~75 MB).
    from wordfreq import available_languages, read_cBpack

    table: dict[str, float] = {}
    lists = available_languages(_WORDLIST)
    for lang in _LANGS:
        buckets = read_cBpack(lists[lang])
        for centibels, words in enumerate(buckets):
            frequency = 10.0 ** (-centibels / 100)  # bucket i holds words at -i cB
            if frequency < MIN_FREQUENCY:
                break
            docs = docs_of_frequency(frequency)
            for word in words:
                if _is_cjk(word) == (lang == "zh") and word not in table:
                    table[word] = docs
        del buckets
    return table


def reference_table() -> dict[str, float]:
    """The table, read once per process on first use."""
    global _table
    if _table is None:
        with _lock:
            if _table is None:
                _table = _load()
    return _table


def reference_docs(surface: str) -> float:
    """How many reference documents hold one casefolded surface word (before stemming)."""
    return reference_table().get(surface, RARE_DOCS)


def reference_idf(surface: str) -> float:
    """The reference IDF of one casefolded surface word (before stemming)."""
    return bm25_idf(reference_docs(surface), REFERENCE_DOCS)


def user_idf(reference: float, user_docs: int, user_holding: int) -> float:
    """IDF over the reference corpus joined by the user's own memories: `user_docs` of
    them, `user_holding` of which hold the word. The reference is a prior that every user
    shares; the user's own counts move it, and nothing else does. A word in every memory of
    the user (a speaker's name in "Caroline: …" turns) then weighs little, as Qdrant's
    IDF had it on a store of one user, while a user of 20 memories keeps the language's
    knowledge of which words are common."""
    return bm25_idf(reference + user_holding, REFERENCE_DOCS + user_docs)

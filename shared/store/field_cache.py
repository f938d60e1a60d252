"""A few payload fields of an embedded shard's points, kept in process memory.

A search reads its scoring fields for every candidate, about 200 points at top_k 10.
Qdrant Edge deserializes a point's whole payload to return any field of it, about 5 µs a
point with the GIL held: at 100k memories the two candidate lists took 1.15 ms with those
fields and 0.15 ms without (a one-off timing). The embedded store is the only writer of its
shard (Edge locks the files to one process), so it can keep the fields itself.

Coherence: a writer invalidates *after* its shard update, and a reader fills only when no
invalidation happened since before it read the shard; so a value read before a write is
never cached after it. A stale value could only reorder results, never show a point: the
shard's own filter decides which points a search sees.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

_ABSENT = object()


class FieldCache:
    """`fields` of up to `max_points` points by id; full means emptied (searches refill it
    from what they read; an LRU's bookkeeping would cost every hit)."""

    def __init__(self, fields: Sequence[str], max_points: int) -> None:
        self.fields = tuple(fields)
        self._wanted = frozenset(self.fields)
        self._max = max_points if self.fields else 0
        self._rows: dict[str, tuple[Any, ...]] = {}
        self._generation = 0
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self._max > 0

    @property
    def capacity(self) -> int:
        return self._max

    @property
    def generation(self) -> int:
        """Read before reading the shard; hand it to `fill`."""
        return self._generation

    def covers(self, fields: Sequence[str] | None) -> bool:
        return self.enabled and bool(fields) and self._wanted.issuperset(fields or ())

    def __len__(self) -> int:
        return len(self._rows)

    def lookup(
        self, ids: Iterable[str], fields: Sequence[str]
    ) -> tuple[dict[str, dict[str, Any]], list[str]]:
        """The payloads (only `fields`) of the ids held, and the ids that are not."""
        positions = [(name, self.fields.index(name)) for name in fields]
        found: dict[str, dict[str, Any]] = {}
        missing: list[str] = []
        rows = self._rows
        for point_id in ids:
            row = rows.get(point_id)
            if row is None:
                missing.append(point_id)
            else:
                found[point_id] = {name: row[i] for name, i in positions
                                   if row[i] is not _ABSENT}
        return found, missing

    def fill(self, generation: int, payloads: Mapping[str, Mapping[str, Any]]) -> bool:
        """Keep these payloads' fields unless a write came since `generation` was read."""
        with self._lock:
            if generation != self._generation or not self.enabled:
                return False
            if len(self._rows) + len(payloads) > self._max:
                self._rows.clear()
            for point_id, payload in payloads.items():
                self._rows[point_id] = tuple(payload.get(name, _ABSENT) for name in self.fields)
            return True

    def touches(self, payload: Mapping[str, Any]) -> bool:
        return not self._wanted.isdisjoint(payload)

    def forget(self, ids: Iterable[str] | None) -> None:
        """After a write: drop these ids (None: every id), and refuse fills begun before."""
        with self._lock:
            self._generation += 1
            if ids is None:
                self._rows.clear()
                return
            for point_id in ids:
                self._rows.pop(point_id, None)

"""A search's candidates column-wise: each ranked list's ids and scores, and the scoring
fields of every candidate as one numpy array.

A search weighs about 200 candidates at top_k 10. As Python objects (a payload dict, a
candidate record, a parsed datetime and a boosts dict each) they cost more CPU than the
shard's own two searches; as columns, rescoring is a few array operations
(docs/decisions/0010-candidates-as-columns.md).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

# The payload fields rescoring reads; the table keeps them parsed (times as epoch seconds).
# `sources[].role` reads only each source's role, not its metadata.
SCORING_FIELDS = ("occurred_at", "importance", "access_count", "thread_id", "thread_seq",
                  "cjk_share", "sources[].role")
# The payload keys those fields live under.
_TOP_KEYS = frozenset(field.split("[", 1)[0] for field in SCORING_FIELDS)
# Columns of `ScoringTable.data`: `OCCURRED` is +inf for a point with no time (it counts as
# new), `THREAD` is -1 for a point outside a thread, `CJK` NaN for a point written before
# memories carried their language, `ASSISTANT` 1 for a memory every source of which is an
# assistant's message (an assistant turn kept as an episode), else 0.
OCCURRED, IMPORTANCE, ACCESS, THREAD, SEQ, CJK, ASSISTANT = range(7)
_WIDTH = 7


def epoch_seconds(value: Any) -> float:
    if not value:
        return math.inf
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


class ThreadCodes:
    """Thread ids as small integers, so that "same thread" is an array comparison."""

    def __init__(self) -> None:
        self._codes: dict[str, int] = {}
        self._names: list[str] = []
        self._lock = threading.Lock()

    def code(self, name: str) -> int:
        found = self._codes.get(name)
        if found is not None:
            return found
        with self._lock:
            found = self._codes.get(name)
            if found is None:
                found = len(self._names)
                self._names.append(name)
                self._codes[name] = found
            return found

    def name(self, code: int) -> str:
        return self._names[code]


def scoring_row(payload: Mapping[str, Any], threads: ThreadCodes) -> tuple[float, ...]:
    importance = payload.get("importance")
    row = (
        epoch_seconds(payload.get("occurred_at")),
        float(int(5 if importance is None else importance)),
        float(int(payload.get("access_count") or 0)),
    )
    share = payload.get("cjk_share")
    cjk = math.nan
    if isinstance(share, int | float) and not isinstance(share, bool):
        cjk = float(share)
    sources = payload.get("sources")
    assistant = float(isinstance(sources, list) and bool(sources) and all(
        isinstance(s, Mapping) and s.get("role") == "assistant" for s in sources))
    thread, seq = payload.get("thread_id"), payload.get("thread_seq")
    if thread and isinstance(seq, int) and not isinstance(seq, bool):
        return (*row, float(threads.code(str(thread))), float(seq), cjk, assistant)
    return (*row, -1.0, 0.0, cjk, assistant)


class ScoringTable:
    """The scoring fields of points by id: `rows` maps an id to its row of `data`.

    Readers use no lock: a row is written before its id is published, rows are never
    rewritten (a changed point gets a new row), and a grown array is a copy, so a reader
    holding either array finds every row published before it looked."""

    def __init__(self, threads: ThreadCodes | None = None, capacity: int = 256) -> None:
        self.threads = threads or ThreadCodes()
        self.rows: dict[str, int] = {}
        self.data = np.empty((max(capacity, 1), _WIDTH))
        self._used = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def used(self) -> int:
        """Rows written, including those of forgotten or rewritten points."""
        return self._used

    def add(self, payloads: Mapping[str, Mapping[str, Any]]) -> None:
        with self._lock:
            start, count = self._used, len(payloads)
            if start + count > len(self.data):
                grown = np.empty((max(2 * len(self.data), start + count), _WIDTH))
                grown[:start] = self.data[:start]
                self.data = grown
            for offset, payload in enumerate(payloads.values()):
                self.data[start + offset] = scoring_row(payload, self.threads)
            self._used = start + count
            for offset, point_id in enumerate(payloads):
                self.rows[point_id] = start + offset

    def forget(self, ids: Iterable[str]) -> None:
        for point_id in ids:
            self.rows.pop(point_id, None)

    def rows_of(self, ids: Sequence[str]) -> np.ndarray:
        """Each id's row, -1 for an id the table does not hold."""
        get = self.rows.get
        return np.fromiter((get(i, -1) for i in ids), np.int64, len(ids))


@dataclass
class RankedLists:
    """One store search: per query, the ids and scores of its ranked list; `ids` is the
    union of the lists in order of first appearance, and `fields[i]` the scoring row of
    `ids[i]` (columns as in `ScoringTable`)."""

    lists: list[tuple[list[str], np.ndarray]]
    ids: list[str]
    fields: np.ndarray
    threads: ThreadCodes

    def thread_of(self, index: int) -> tuple[str, int] | None:
        code = int(self.fields[index, THREAD])
        if code < 0:
            return None
        return self.threads.name(code), int(self.fields[index, SEQ])


def union_ids(lists: Sequence[tuple[list[str], np.ndarray]]) -> list[str]:
    return list(dict.fromkeys(point_id for point_ids, _ in lists for point_id in point_ids))


def ranked_lists(
    lists: Sequence[tuple[list[str], np.ndarray]], ids: list[str], rows: np.ndarray,
    table: ScoringTable, extra: ScoringTable | None = None,
) -> RankedLists:
    """The candidates `ids` (`union_ids(lists)`) with their `rows` in `table`; those it did
    not hold (-1) are looked up in `extra`, which must share its thread codes. An id in
    neither (deleted since its list was read) leaves every list."""
    fields = np.empty((len(ids), _WIDTH))
    held = rows >= 0
    fields[held] = table.data[rows[held]]
    if held.all():
        return RankedLists(list(lists), ids, fields, table.threads)
    absent = np.flatnonzero(~held)
    found = np.zeros(len(absent), dtype=bool)
    if extra is not None:
        other = extra.rows_of([ids[i] for i in absent])
        found = other >= 0
        fields[absent[found]] = extra.data[other[found]]
    if found.all():
        return RankedLists(list(lists), ids, fields, table.threads)
    gone = {ids[i] for i in absent[~found]}
    kept = [i for i, point_id in enumerate(ids) if point_id not in gone]
    pruned = []
    for point_ids, scores in lists:
        keep = [j for j, point_id in enumerate(point_ids) if point_id not in gone]
        pruned.append(([point_ids[j] for j in keep], scores[keep]))
    return RankedLists(pruned, [ids[i] for i in kept], fields[kept], table.threads)


class ScoringCache:
    """The embedded store's `ScoringTable` of up to `max_points` points; full means emptied
    (searches refill it from what they read; an LRU's bookkeeping would cost every hit).

    The embedded store is the only writer of its shard (Edge locks the files to one
    process), so it can keep these fields itself. Coherence: a writer invalidates *after*
    its shard update, and a reader fills only when no invalidation happened since before
    it read the shard; so a value read before a write is never cached after it. A stale
    value could only reorder results, never show a point: the shard's own filter decides
    which points a search sees."""

    def __init__(self, max_points: int) -> None:
        self._max = max_points
        self.table = ScoringTable()
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

    def __len__(self) -> int:
        return len(self.table)

    def fill(self, generation: int, payloads: Mapping[str, Mapping[str, Any]]) -> bool:
        """Keep these payloads' fields unless a write came since `generation` was read."""
        with self._lock:
            if generation != self._generation or not self.enabled:
                return False
            # Counted in rows written, not ids held: a point that is written and read again
            # takes a new row each time, and the dead ones go only with the table.
            if self.table.used + len(payloads) > self._max:
                # Readers keep the table they took; new ones start on an empty one.
                self.table = ScoringTable()
            self.table.add(payloads)
            return True

    def forget(self, ids: Iterable[str] | None) -> None:
        """After a write: drop these ids (None: every id), and refuse fills begun before."""
        with self._lock:
            self._generation += 1
            if ids is None:
                self.table = ScoringTable()
            else:
                self.table.forget(ids)

    @staticmethod
    def touches(payload: Mapping[str, Any]) -> bool:
        """Whether a payload update changes a scoring field (`sources` for its roles)."""
        return not _TOP_KEYS.isdisjoint(payload)

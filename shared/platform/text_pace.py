"""Pacing for a job's per-text passes (redaction, the rules extractor), one message at a time.

The passes are pure Python: they hold the interpreter lock while they run. In the embedded
stack the gateway's request threads share that lock with the worker threads, so a tenant
whose messages make those passes heavy (a full-size hostile message costs tens of ms)
would slow every other tenant's searches, the more so with several worker threads at it.
So the passes of all jobs in a process take turns, one message at a time, and spend from a
budget of CPU time that refills at `share` of wall time up to `burst_s`: once it is spent,
the turn's holder sleeps until it is back to zero. Sustained text work then takes at most
`share` of the time, and request threads get the rest; ordinary traffic (well under a
millisecond a message) never comes near the budget. In a prefork worker (one job a process)
the budget paces that process alone.

One pacer a process, built from its settings (`text_pace_share`, `text_pace_burst_s`) by
the process's `Runtime` (`Runtime.text_pacer`), which hands it to every job's writer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class TextPacer:
    def __init__(self, share: float, burst_s: float) -> None:
        self.share = share
        self.burst_s = burst_s
        self._turn = threading.Lock()
        self._credit_s = burst_s
        self._at = time.monotonic()

    def run(self, work: Callable[[], T]) -> T:
        if self.share >= 1:
            return work()
        with self._turn:
            now = time.monotonic()
            self._credit_s = min(self.burst_s, self._credit_s + (now - self._at) * self.share)
            self._at = now
            started = time.perf_counter()
            result = work()
            self._credit_s -= time.perf_counter() - started
            if self._credit_s < 0:
                time.sleep(-self._credit_s / self.share)
                self._credit_s, self._at = 0.0, time.monotonic()
        return result

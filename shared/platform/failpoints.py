"""Named places where a fault drill can stop a process, so a test or `ops/chaos` can kill it
at exactly that point (FoundationDB- and TiKV-style failpoints, off unless configured).

`MEMORYD_FAILPOINTS=store.upsert` with `MEMORYD_FAILPOINT_DIR=<dir>`: the first process to
reach `store.upsert` creates `<dir>/store.upsert` holding its pid and then waits
`MEMORYD_FAILPOINT_PAUSE_S`, long enough to be SIGKILLed there; every later pass (the
redelivered job) goes straight through, because the file already exists. Unconfigured, a
failpoint costs one frozenset lookup.

Failpoints: `store.upsert` (a memory point written, its job neither finished nor acked),
`embed.documents` (before the embedding call of a write), `llm.extract` (an LLM extraction
job right before the model is asked; `ops/chaos/llm.py` kills a worker there), `job.finish`
(a job's writes done, its success not yet recorded nor its message acked;
`ops/chaos/embedded.py` takes Redis away there), `job.fail` (a job failed for good, its
failure not yet recorded), `broker.taken` (a worker has taken a
message off its queue and not yet recorded it as unacknowledged: memoryd.jobs.broker).
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from memoryd.platform.errors import ConfigurationError
from memoryd.platform.settings import Settings

STORE_UPSERT = "store.upsert"
EMBED_DOCUMENTS = "embed.documents"
LLM_EXTRACT = "llm.extract"  # an LLM extraction job, just before the model is asked
JOB_FINISH = "job.finish"  # a job done, before its success is recorded and acked
JOB_FAIL = "job.fail"  # a job failed for good, before its failure is recorded
BROKER_TAKEN = "broker.taken"  # a message off its queue, not yet recorded as unacked
KNOWN = frozenset({STORE_UPSERT, EMBED_DOCUMENTS, LLM_EXTRACT, JOB_FINISH, JOB_FAIL,
                   BROKER_TAKEN})

_armed: frozenset[str] = frozenset()
_dir: Path | None = None
_pause_s = 0.0


def arm(settings: Settings) -> None:
    """Read the drill from settings; called once per process when its Runtime is built."""
    global _armed, _dir, _pause_s
    names = frozenset(n.strip() for n in settings.failpoints.split(",") if n.strip())
    unknown = names - KNOWN
    if unknown:
        raise ConfigurationError(
            f"failpoints: unknown {sorted(unknown)}; known: {sorted(KNOWN)}", field="failpoints"
        )
    if names and settings.failpoint_dir is None:
        raise ConfigurationError(
            "failpoints need failpoint_dir (where the reached marker is written)",
            field="failpoint_dir",
        )
    _armed, _dir, _pause_s = names, settings.failpoint_dir, settings.failpoint_pause_s


def reach(name: str) -> None:
    if name not in _armed or _dir is None:
        return
    marker = _dir / name
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return  # already fired once: the redelivered run passes
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(str(os.getpid()))
    time.sleep(_pause_s)


def reached(directory: Path, name: str) -> int | None:
    """The pid that stopped at `name`, once it has (for the side doing the killing)."""
    with contextlib.suppress(OSError, ValueError):
        text = (directory / name).read_text(encoding="ascii").strip()
        if text:
            return int(text)
    return None

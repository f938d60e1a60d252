"""Embedded mode: Redis goes away while a job waits at a failpoint, at the two places where
it once took the job with it, and comes back; every job still ends `succeeded`, its memory
stored once.

- `broker.taken`: the worker has taken the message off its queue and not yet recorded it as
  unacknowledged. kombu alone loses the message there (the Redis restart drill lost one job
  in about fifteen runs that way); memoryd.jobs.broker keeps it and gives it back.
- `job.finish`: the job's writes are done and its success not yet recorded. Recorded by
  Celery's `on_success`, a failure to record was logged and the message acknowledged, the
  job left `running`; the run records it now (workers/task_base.py `_succeeded`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.platform import failpoints
from ops.chaos.embedded import redis_away_at


@pytest.mark.parametrize("failpoint", [failpoints.BROKER_TAKEN, failpoints.JOB_FINISH])
def test_redis_gone_at_a_failpoint_loses_no_job(tmp_path: Path, failpoint: str) -> None:
    row = redis_away_at(tmp_path, failpoint, n=2, pause_s=2.0, outage_s=2.0)
    assert (row.expected, row.found, row.duplicates, row.lost) == (2, 2, 0, 0), row

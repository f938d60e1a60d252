"""A run that ends while Redis is away cannot drop its job's lease, and the lease comes back
with Redis's AOF; the job's next run in the same process frees it at once instead of
waiting out its time to live (memoryd.jobs.leases), on a real redis-server stopped and
started again."""

from __future__ import annotations

from pathlib import Path

import redis

from memoryd.jobs.job_store import JobStore
from memoryd.jobs.leases import LeaseKeeper
from memoryd.platform.redis_runtime import ensure_redis, free_port


def test_a_lease_left_by_a_finished_run_is_freed_by_its_process(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    server = ensure_redis(url, tmp_path / "redis-data")
    client = redis.Redis.from_url(url)
    jobs = JobStore(client, 3600)
    here, elsewhere = LeaseKeeper(), LeaseKeeper()
    try:
        first = here.token()
        assert here.take(jobs, "job-1", first, 15.0) is None
        here.hold(jobs, "job-1", first, 15.0)
        server.stop()  # SIGTERM: the AOF keeps the lease
        here.drop(first)  # the run ends; Redis is away
        server = ensure_redis(url, tmp_path / "redis-data")
        assert client.get("memoryd:job:job-1:lease") == first.encode()

        # Another process cannot tell a finished run from a running one: it waits.
        busy_for = elsewhere.take(jobs, "job-1", elsewhere.token(), 15.0)
        assert busy_for is not None and 0 < busy_for <= 15.0
        # The process whose run left it frees it and takes it.
        second = here.token()
        assert here.take(jobs, "job-1", second, 15.0) is None
        assert client.get("memoryd:job:job-1:lease") == second.encode()
        # A lease held by a live run is never freed so.
        assert here.take(jobs, "job-1", here.token(), 15.0) is not None
    finally:
        server.stop()

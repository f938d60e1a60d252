"""Give back the messages an embedded run had taken but will never acknowledge: at start,
those of a run that crashed; after a lost broker connection, those Celery dropped.

kombu's Redis transport keeps every delivered, unacknowledged message in the `unacked`
hash (indexed by delivery time in the `unacked_index` zset) and puts it back on its queue
only once it is older than the visibility timeout. A SIGKILLed `memoryd up` therefore
leaves its in-flight jobs invisible for that long. The embedded stack is the only consumer
of its Redis database (its Qdrant Edge shard opens in one process only), so when the
previous run of the same data directory died without stopping, everything still unacked
there is that run's, and is requeued before the new worker starts consuming.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from celery import Celery
from kombu import Connection

from memoryd.platform.redis_process import pid_alive

RUN_FILE = "worker.run"
_BATCH = 100


class RunRecord:
    """`<data_dir>/worker.run` holds the pid of the embedded worker using that directory;
    a clean stop removes it, so finding it with a dead pid means the last run crashed."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / RUN_FILE

    def claim(self) -> bool:
        """Record this process; True when the previous run died without stopping."""
        crashed = False
        with contextlib.suppress(OSError, ValueError):
            pid = int(self.path.read_text(encoding="ascii").strip())
            crashed = pid != os.getpid() and not pid_alive(pid)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(str(os.getpid()), encoding="ascii")
        os.replace(tmp, self.path)
        return crashed

    def release(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            if int(self.path.read_text(encoding="ascii").strip()) == os.getpid():
                self.path.unlink()


def requeue_orphans(app: Celery, held: set[str], delivered_before: float) -> int:
    """Requeue the unacknowledged messages delivered before `delivered_before` (epoch
    seconds, as kombu's `unacked_index` records deliveries) whose delivery tag is not in
    `held` (the ones this process's workers are running or holding); returns how many.

    After a lost broker connection Celery drops the messages it had reserved but not
    started, and the countdowns of retries it was holding ("the broker may redeliver
    these"); over Redis they would sit in `unacked` for the whole visibility timeout. Only
    for a broker database that this process alone consumes (the embedded stack): there,
    an unacked message nobody here holds is nobody's. Each restore is kombu's own
    (`QoS.restore_by_tag`, one transaction): a message restored twice is queued once.
    """
    with Connection(app.conf.broker_url,
                    transport_options=dict(app.conf.broker_transport_options or {})) as conn:
        channel: Any = conn.default_channel
        delivered = channel.client.zrangebyscore(channel.unacked_index_key, "-inf",
                                                 f"({delivered_before}")
        tags = {tag.decode() if isinstance(tag, bytes) else str(tag) for tag in delivered}
        orphans = sorted(tags - held)
        for tag in orphans:
            channel.qos.restore_by_tag(tag)
        return len(orphans)


def requeue_unacked(app: Celery) -> int:
    """Requeue every unacknowledged message of this broker database; returns how many.

    Uses kombu's own restore (`QoS.restore_visible`, under its `unacked_mutex`) with a
    visibility timeout of zero, so each message goes back to the queue it was routed to,
    marked redelivered, exactly as a timeout would have restored it.
    """
    options = dict(app.conf.broker_transport_options or {})
    options["visibility_timeout"] = 0
    with Connection(app.conf.broker_url, transport_options=options) as conn:
        # kombu's Redis Channel: its QoS and key names are not in the generic stubs.
        channel: Any = conn.default_channel
        client = channel.client
        total = 0
        pending = int(client.zcard(channel.unacked_index_key))
        # Bounded: each pass restores up to _BATCH; nothing else consumes meanwhile.
        for _ in range(pending // _BATCH + 2):
            if pending == 0:
                break
            channel.qos.restore_visible(start=0, num=_BATCH, interval=1)
            left = int(client.zcard(channel.unacked_index_key))
            total += pending - left
            pending = left
        return total

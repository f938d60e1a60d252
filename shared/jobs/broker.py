"""kombu's Redis transport, keeping the messages it took but could not record.

kombu takes a message off its queue (BRPOP) and only then records it as unacknowledged
(`QoS.append`: the `unacked` hash and `unacked_index` zset that every later restore reads).
When Redis goes away between the two (a restart, a failover, a dropped connection), the
message exists only in the consumer's memory: `append` raises, Celery never sees the
message, no restore can find it, and its job stays `queued` for good
(`tests/faults/test_redis_away.py` stops Redis right there, failpoint `broker.taken`).

Here a message whose record could not be written is kept in this process (`TAKEN`) and
given back to the head of its queue once Redis answers again: by `ReturnTakenMessages`,
a consumer step every Celery app of memoryd has (`memoryd.jobs.celery_app.create_app`),
which runs whenever a worker's consumer (re)connects and when it stops. Celery never
received such a message, so giving it back cannot run its job twice; if the record was
written after all (its reply lost), the message is left to the restores that read it.

A process that dies while holding such a message (SIGKILL, or a prefork worker's
"Unrecoverable error" before Redis is back) still loses it, and the kept count is logged
(`broker_message_kept`). Not closed here: Redis can run the BRPOP and exit before its
reply is sent; no worker ever holds that message (docs/faults.md).
"""

from __future__ import annotations

import copy
import threading
from typing import Any

from celery import Celery, bootsteps
from kombu.transport import redis as kombu_redis

from memoryd.platform import failpoints
from memoryd.platform.logs import exception_summary, get_logger

log = get_logger("memoryd.broker")


class TakenMessages:
    """Messages taken off their queue by this process whose unacknowledged record failed:
    (payload, exchange, routing key) by delivery tag, until they are given back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, tuple[dict[str, Any], str, str]] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)

    def keep(self, tag: str, payload: dict[str, Any], exchange: str, routing_key: str) -> None:
        with self._lock:
            self._held[tag] = (copy.deepcopy(payload), exchange, routing_key)

    def give_back(self, channel: Any) -> int:
        """Put each kept message back at the head of its queue through `channel` (a kombu
        Redis channel), as kombu's own restore would; returns how many. One that cannot be
        given back now (Redis gone again) stays kept, so the next call tries it again."""
        with self._lock:
            held = list(self._held.items())
        returned = 0
        for tag, (payload, exchange, routing_key) in held:
            client = channel.client
            # Recorded after all (the reply was what got lost): the restores that read the
            # record give it back; pushing it here too would queue it twice.
            if not client.hexists(channel.unacked_key, tag):
                pipe = client.pipeline()
                channel._do_restore_message(copy.deepcopy(payload), exchange, routing_key, pipe)
                pipe.execute()
            with self._lock:
                self._held.pop(tag, None)
            returned += 1
        return returned


# kombu builds transports, channels and their QoS itself, one set per connection, and a
# kept message must outlive the connection that took it: so one registry per process.
TAKEN = TakenMessages()


class QoS(kombu_redis.QoS):
    def append(self, message: Any, delivery_tag: Any) -> None:
        # Drills stop Redis right here: the message is off its queue and not yet recorded.
        failpoints.reach(failpoints.BROKER_TAKEN)
        try:
            super().append(message, delivery_tag)
        except Exception as exc:
            delivery = message.delivery_info
            TAKEN.keep(str(delivery_tag), message._raw, delivery["exchange"],
                       delivery["routing_key"])
            log.warning("broker_message_kept", delivery_tag=str(delivery_tag),
                        kept=len(TAKEN), error=type(exc).__name__)
            raise


class Channel(kombu_redis.Channel):
    QoS = QoS


class Transport(kombu_redis.Transport):
    """What `broker_transport` names for a redis:// or rediss:// broker URL."""

    Channel = Channel


TRANSPORT = f"{Transport.__module__}:{Transport.__qualname__}"


def give_back_taken(app: Celery) -> int:
    """Give the kept messages back through a connection of `app`; 0 when there are none or
    Redis does not answer (they stay kept)."""
    if not len(TAKEN):
        return 0
    try:
        with app.connection_for_write() as conn:
            conn.connect()  # one attempt, not the app's connection retries
            returned = TAKEN.give_back(conn.default_channel)
    except Exception as exc:  # noqa: BLE001  (Redis gone again, or kombu's wrapping of it:
        # a consumer step must not fail its consumer; the messages stay kept)
        log.warning("broker_messages_not_returned", kept=len(TAKEN),
                    error=exception_summary(exc))
        return 0
    log.warning("broker_messages_returned", count=returned, kept=len(TAKEN))
    return returned


class ReturnTakenMessages(bootsteps.StartStopStep):
    """Gives back the kept messages whenever a consumer (re)connects, before its event loop
    takes anything new, and once more when it stops."""

    requires = ("celery.worker.consumer.connection:Connection",)

    def start(self, parent: Any) -> None:
        give_back_taken(parent.app)

    def shutdown(self, parent: Any) -> None:
        give_back_taken(parent.app)

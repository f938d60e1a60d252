"""A message taken off its queue whose unacknowledged record cannot be written (Redis gone
in between) is kept by the process and given back to its queue once Redis is back
(memoryd.jobs.broker), on a real redis-server stopped and started again on its AOF."""

from __future__ import annotations

import ssl
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis
from kombu import Connection, Exchange, Queue

from memoryd.jobs.broker import TAKEN, TRANSPORT, TakenMessages, give_back_taken
from memoryd.jobs.celery_app import create_app
from memoryd.platform.redis_runtime import ensure_redis, free_port
from memoryd.platform.settings import Settings


def _taken(conn: Connection, name: str, body: dict[str, Any]) -> Any:
    """`body` published to a queue `name` and taken off it as a consumer takes it (BRPOP),
    not yet recorded as unacknowledged."""
    channel = conn.default_channel
    queue = Queue(name, Exchange(name, type="direct"), routing_key=name)
    queue(channel).declare()
    conn.Producer(channel).publish(body, exchange=queue.exchange, routing_key=name)
    return channel.Message(channel._get(name), channel=channel)


def test_a_message_whose_record_failed_goes_back_to_its_queue(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    server = ensure_redis(url, tmp_path / "redis-data")
    name = f"taken-{uuid.uuid4().hex[:8]}"
    app = create_app(Settings(redis_url=url))
    try:
        with Connection(url, transport=TRANSPORT) as conn:
            channel = conn.default_channel
            message = _taken(conn, name, {"job": "one"})
            server.stop()  # before the consumer's next step: recording it
            with pytest.raises(redis.ConnectionError):
                channel.qos.append(message, message.delivery_tag)
            assert len(TAKEN) == 1
            # Redis down: the message stays kept.
            assert give_back_taken(app) == 0 and len(TAKEN) == 1
        server = ensure_redis(url, tmp_path / "redis-data")
        assert give_back_taken(app) == 1 and len(TAKEN) == 0
        with Connection(url, transport=TRANSPORT) as conn:
            channel = conn.default_channel
            again = channel.basic_get(name, no_ack=True)
            assert again is not None
            assert again.decode() == {"job": "one"}
            assert again.delivery_info["redelivered"] is True
            assert channel.basic_get(name, no_ack=True) is None  # given back once
    finally:
        server.stop()


def test_a_message_recorded_after_all_is_not_queued_twice(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    server = ensure_redis(url, tmp_path / "redis-data")
    name = f"recorded-{uuid.uuid4().hex[:8]}"
    kept = TakenMessages()
    try:
        with Connection(url, transport=TRANSPORT) as conn:
            channel = conn.default_channel
            message = _taken(conn, name, {"job": "two"})
            # The record was written and only its reply lost: the unacked restores own it.
            channel.qos.append(message, message.delivery_tag)
            delivery = message.delivery_info
            kept.keep(str(message.delivery_tag), message._raw, delivery["exchange"],
                      delivery["routing_key"])
            assert kept.give_back(channel) == 1 and len(kept) == 0
            assert channel.basic_get(name, no_ack=True) is None
            assert channel.client.hexists(channel.unacked_key, message.delivery_tag)
    finally:
        server.stop()


def test_every_app_consumes_through_the_keeping_transport() -> None:
    plain = create_app(Settings(redis_url="redis://127.0.0.1:6390/0")).connection_for_write()
    assert plain.transport_cls == TRANSPORT and not plain.ssl
    # rediss:// verifies the server, as memoryd's own redis-py clients do (kombu's
    # default for the scheme is CERT_NONE).
    secure = create_app(Settings(redis_url="rediss://127.0.0.1:6390/0")).connection_for_write()
    assert secure.transport_cls == TRANSPORT
    assert secure.ssl == {"ssl_cert_reqs": ssl.CERT_REQUIRED}

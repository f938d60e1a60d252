"""The webhooks service: registration, emission where jobs end, and one delivery attempt.

Emission runs in the task's success or failure hook and must never slow or fail the job:
a tenant without endpoints costs one Redis read, and every error is logged and dropped.
Deliveries are `webhook.deliver` tasks on the `webhooks` queue; the task carries only the
delivery's id (the body stays in Redis, so no memory text reaches Celery's messages or
events) and asks this service for one attempt at a time.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import httpx
import redis
from celery import Celery

from memoryd.jobs.names import TaskName
from memoryd.jobs.send import send
from memoryd.platform.errors import InvalidInput, NotFound
from memoryd.platform.logs import get_logger
from memoryd.platform.settings import Settings
from memoryd.records.models import utcnow
from memoryd.records.webhooks import (
    DeliveryList,
    DeliveryStatus,
    WebhookCreate,
    WebhookCreated,
    WebhookList,
)
from memoryd.webhooks import signing
from memoryd.webhooks.deliveries import DeliveryLog
from memoryd.webhooks.endpoints import EndpointStore
from memoryd.webhooks.events import JobEnd, events_of
from memoryd.webhooks.urls import Resolver, UrlPolicy, check_url, system_resolver, target

log = get_logger("memoryd.webhooks")

_ERROR_CHARS = 300  # of an attempt's error kept on the delivery
USER_AGENT = "memoryd-webhooks/1"


@dataclass(frozen=True)
class Attempt:
    """One attempt's outcome for the task: `retry_in_s` set means send it again then."""

    status: DeliveryStatus | None
    attempts: int = 0
    status_code: int | None = None
    retry_in_s: float | None = None


def forget_user_deliveries(client: redis.Redis, settings: Settings, tenant_id: str,
                           user_id: str) -> dict[str, int]:
    """After a forget of the user (in the worker, which has no `Webhooks`): no delivery of
    the tenant's endpoints keeps or sends their memory text (`DeliveryLog.forget_user`)."""
    endpoints = EndpointStore(client, settings.webhook_max_endpoints).all(tenant_id)
    deliveries = DeliveryLog(client, settings.webhook_deliveries_kept,
                             settings.webhook_delivery_ttl_s)
    return deliveries.forget_user(tenant_id, user_id, [e.id for e in endpoints])


def backoff_s(attempt: int, base_s: float, max_s: float) -> float:
    """Exponential, capped, with ±20% jitter so a receiver coming back is not hit in step."""
    return float(min(max_s, base_s * 2 ** (attempt - 1)) * random.uniform(0.8, 1.2))


class Webhooks:
    def __init__(self, client: redis.Redis, celery: Celery, settings: Settings,
                 http: Callable[[], httpx.Client] | None = None,
                 resolve: Resolver = system_resolver) -> None:
        self.settings = settings
        self.endpoints = EndpointStore(client, settings.webhook_max_endpoints)
        self.log = DeliveryLog(client, settings.webhook_deliveries_kept,
                               settings.webhook_delivery_ttl_s)
        self.policy = UrlPolicy.from_settings(settings)
        self._celery = celery
        self._resolve = resolve
        self._make_http = http or self._default_http
        self._http: httpx.Client | None = None

    def _default_http(self) -> httpx.Client:
        s = self.settings
        # No redirects (a 3xx could point at a refused host) and no proxy from the
        # environment: the host that was checked is the host that is called.
        return httpx.Client(
            timeout=httpx.Timeout(s.webhook_timeout_s, connect=s.webhook_connect_timeout_s),
            follow_redirects=False, trust_env=False, headers={"User-Agent": USER_AGENT})

    @property
    def http(self) -> httpx.Client:
        if self._http is None:
            self._http = self._make_http()
        return self._http

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    # ---- registration --------------------------------------------------------------

    def register(self, tenant_id: str, request: WebhookCreate) -> WebhookCreated:
        check_url(request.url, self.policy, self._resolve)
        return self.endpoints.create(tenant_id, request)

    def list(self, tenant_id: str) -> WebhookList:
        return WebhookList(items=[e.view() for e in self.endpoints.all(tenant_id)])

    def remove(self, tenant_id: str, endpoint_id: str) -> None:
        self.endpoints.remove(tenant_id, endpoint_id)
        self.log.forget_endpoint(tenant_id, endpoint_id)

    def rotate_secret(self, tenant_id: str, endpoint_id: str) -> WebhookCreated:
        return self.endpoints.rotate(tenant_id, endpoint_id)

    def forget_user(self, tenant_id: str, user_id: str) -> dict[str, int]:
        """After a forget of the user: no delivery keeps or sends their memory text."""
        return self.log.forget_user(tenant_id, user_id,
                                    [e.id for e in self.endpoints.all(tenant_id)])

    def deliveries(self, tenant_id: str, endpoint_id: str, limit: int) -> DeliveryList:
        self.endpoints.get(tenant_id, endpoint_id)  # 404 for another tenant's endpoint
        return DeliveryList(items=self.log.recent(tenant_id, endpoint_id, limit))

    # ---- emission ------------------------------------------------------------------

    def emit(self, end: JobEnd) -> int:
        """Enqueue the job's events for the tenant's subscribed endpoints; how many
        deliveries are new. Never raises: the job's outcome is already recorded."""
        try:
            return self._emit(end)
        except Exception as exc:  # noqa: BLE001  (a webhook must never fail the job)
            log.warning("webhook_emit_failed", job_id=end.job_id, error=str(exc))
            return 0

    def _emit(self, end: JobEnd) -> int:
        endpoints = self.endpoints.all(end.tenant_id)
        if not endpoints:
            return 0
        sent = 0
        for plain, full in events_of(end):
            bodies = {False: plain.model_dump_json(exclude_none=True),
                      True: full.model_dump_json(exclude_none=True)}
            for endpoint in endpoints:
                if plain.type not in endpoint.events:
                    continue
                delivery_id = "dlv_" + plain.id.removeprefix("evt_")[:16] + endpoint.id[3:]
                if not self.log.claim(end.tenant_id, endpoint.id, delivery_id, plain.id,
                                      plain.type.value, bodies[endpoint.include_content]):
                    continue  # this endpoint already has this event
                try:
                    send(self._celery, TaskName.WEBHOOK_DELIVER,
                         {"delivery": {"delivery_id": delivery_id}})
                except Exception as exc:  # noqa: BLE001  (the broker refused it)
                    # Claimed and never sent: listed as failed, not pending for good.
                    self.log.record(delivery_id, DeliveryStatus.FAILED, status_code=None,
                                    error=f"not enqueued: {exc}"[:_ERROR_CHARS])
                    continue
                sent += 1
        return sent

    # ---- delivery ------------------------------------------------------------------

    def attempt(self, delivery_id: str) -> Attempt:
        """One attempt of a delivery, its outcome recorded on it."""
        delivery = self.log.get(delivery_id)
        if delivery is None or delivery.status in (DeliveryStatus.DELIVERED,
                                                   DeliveryStatus.FAILED):
            return Attempt(status=None if delivery is None else delivery.status)
        try:
            endpoint = self.endpoints.get(delivery.tenant, delivery.endpoint_id)
            # Checked and resolved once: the connection goes to the address checked, so a
            # name rebinding to an internal address after the check reaches nothing.
            url, pinned_headers, extensions = target(
                endpoint.url, self.policy, self._resolve).request()
        except (NotFound, InvalidInput) as exc:  # removed, or its host is now refused
            return self._give_up(delivery_id, delivery.attempts, exc.message)
        number, status, text = self.log.begin_attempt(delivery_id)
        if status != delivery.status.value:  # ended meanwhile (a forget cancelled it)
            return Attempt(None if status is None else DeliveryStatus(status), number)
        body = text.encode()
        headers = {
            "Content-Type": "application/json",
            signing.SIGNATURE_HEADER: signing.signature_header(endpoint.secret, body),
            signing.EVENT_ID_HEADER: delivery.event_id,
            signing.EVENT_HEADER: delivery.event.value,
            signing.DELIVERY_HEADER: delivery_id,
            **pinned_headers,
        }
        code: int | None = None
        error: str | None = None
        try:
            # Only the status line matters: the receiver's body is never read.
            with self.http.stream("POST", url, content=body, headers=headers,
                                  extensions=extensions) as reply:
                code = reply.status_code
        except httpx.TimeoutException as exc:
            error = f"timeout: {type(exc).__name__}"
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS]
        if code is not None and 200 <= code < 300:
            self.log.record(delivery_id, DeliveryStatus.DELIVERED, status_code=code, error=None)
            return Attempt(DeliveryStatus.DELIVERED, number, code)
        if code is not None:
            error = f"HTTP {code}"
        if number >= self.settings.webhook_max_attempts:
            self.log.record(delivery_id, DeliveryStatus.FAILED, status_code=code, error=error)
            log.warning("webhook_delivery_failed", delivery_id=delivery_id, attempts=number,
                        error=error)
            return Attempt(DeliveryStatus.FAILED, number, code)
        delay = backoff_s(number, self.settings.webhook_backoff_base_s,
                          self.settings.webhook_backoff_max_s)
        self.log.record(delivery_id, DeliveryStatus.RETRYING, status_code=code, error=error,
                        next_retry_at=utcnow() + timedelta(seconds=delay))
        return Attempt(DeliveryStatus.RETRYING, number, code, retry_in_s=delay)

    def _give_up(self, delivery_id: str, attempts: int, reason: str) -> Attempt:
        self.log.record(delivery_id, DeliveryStatus.FAILED, status_code=None,
                        error=reason[:_ERROR_CHARS])
        return Attempt(DeliveryStatus.FAILED, attempts)

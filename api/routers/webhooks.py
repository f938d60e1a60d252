"""/v1/webhooks: a tenant's webhook endpoints and their recent deliveries (shared/webhooks/).

Every route needs the `admin` scope: an endpoint sends the tenant's events, and with
`include_content` its memories' text, to a URL of the caller's choosing.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from memoryd.api.deps import RuntimeDep, TenantDep
from memoryd.api.responses import ERROR_RESPONSES
from memoryd.records.webhooks import DeliveryList, WebhookCreate, WebhookCreated, WebhookList

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"], responses=ERROR_RESPONSES)

WebhookId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^wh_[0-9a-f]+$")]


@router.post("", response_model=WebhookCreated, status_code=201)
def create_webhook(rt: RuntimeDep, tenant: TenantDep, body: WebhookCreate) -> WebhookCreated:
    """Register an endpoint. The answer holds its signing secret, shown this once.

    The URL must be http(s) without credentials, on a host that resolves to none of the
    refused addresses (loopback, link-local, unspecified, multicast, reserved, and private
    unless the deployment allows it): 422 `url_refused` otherwise."""
    return rt.webhooks.register(tenant, body)


@router.get("", response_model=WebhookList)
def list_webhooks(rt: RuntimeDep, tenant: TenantDep) -> WebhookList:
    """The tenant's endpoints, oldest first, without their secrets."""
    return rt.webhooks.list(tenant)


@router.delete("/{webhook_id}", status_code=204)
def delete_webhook(rt: RuntimeDep, tenant: TenantDep, webhook_id: WebhookId) -> Response:
    """Remove an endpoint and its delivery log; pending retries to it stop."""
    rt.webhooks.remove(tenant, webhook_id)
    return Response(status_code=204)


@router.post("/{webhook_id}/rotate-secret", response_model=WebhookCreated)
def rotate_webhook_secret(rt: RuntimeDep, tenant: TenantDep,
                          webhook_id: WebhookId) -> WebhookCreated:
    """A new signing secret, shown this once; every attempt from now on signs with it."""
    return rt.webhooks.rotate_secret(tenant, webhook_id)


@router.get("/{webhook_id}/deliveries", response_model=DeliveryList)
def list_deliveries(
    rt: RuntimeDep, tenant: TenantDep, webhook_id: WebhookId,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> DeliveryList:
    """The endpoint's recent deliveries, newest first: status, attempts, last status code,
    last error and next retry. The newest `MEMORYD_WEBHOOK_DELIVERIES_KEPT` are kept."""
    return rt.webhooks.deliveries(tenant, webhook_id, limit)

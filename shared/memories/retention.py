"""Retention: what has expired is hidden from every read at once and purged for real later.

A memory expires at its own `expires_at` (set on save or patch) or when it is older
(by `created_at`) than its tenant's retention period (`MEMORYD_TENANT_RETENTION_DAYS`,
else `MEMORYD_RETENTION_DAYS`). Reads filter both out, so nothing expired is returned
between its expiry and the purge; `memory.purge_expired` (Celery beat in server mode,
a timer inside `memoryd up`) deletes the points, erases the content from their audit
trail and records a DELETE event without content.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from redis import Redis

from memoryd.index.generations import IndexRouter
from memoryd.memories.erasure import Erasure, after_forget
from memoryd.memories.locks import user_lock
from memoryd.platform.logs import get_logger
from memoryd.platform.settings import Settings, parse_tenant_days
from memoryd.records.models import AuditEvent, AuditKind, Owner, utcnow
from memoryd.store.conditions import AllOf, AnyOf, Between, Condition, IdIn, Match, NoneOf

log = get_logger("memoryd.retention")

DAY_S = 86400.0
_BATCH = 256


def retention_days(settings: Settings, tenant: str) -> float | None:
    overrides = parse_tenant_days(settings.tenant_retention_days or "")
    return overrides.get(tenant, settings.retention_days)


def live_conditions(
    settings: Settings, tenant: str, now: datetime | None = None
) -> list[Condition]:
    """What every read adds: not past its own expiry, not older than the tenant keeps."""
    now_ts = (now or utcnow()).timestamp()
    # A negated range keeps points that have no expires_ts at all (they never expire).
    conds: list[Condition] = [NoneOf((Between("expires_ts", lte=now_ts),))]
    days = retention_days(settings, tenant)
    if days is not None:
        conds.append(Between("created_ts", gt=now_ts - days * DAY_S))
    return conds


def expired_selectors(settings: Settings, now: datetime) -> list[Condition]:
    """One filter per way to expire; together they cover every expired point."""
    now_ts = now.timestamp()
    selectors: list[Condition] = [Between("expires_ts", lte=now_ts)]
    overrides = parse_tenant_days(settings.tenant_retention_days or "")
    for tenant, days in overrides.items():
        selectors.append(AllOf((Match("tenant_id", tenant),
                                Between("created_ts", lte=now_ts - days * DAY_S))))
    if settings.retention_days is not None:
        cutoff = Between("created_ts", lte=now_ts - settings.retention_days * DAY_S)
        if overrides:
            selectors.append(AllOf((NoneOf((AnyOf("tenant_id", tuple(overrides)),)), cutoff)))
        else:
            selectors.append(cutoff)
    return selectors


def purge_expired(
    index: IndexRouter,
    redis: Redis,
    settings: Settings,
    erasure: Erasure,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Delete every expired memory of every tenant; returns how many, per tenant."""
    now = now or utcnow()
    deleted: dict[str, int] = defaultdict(int)
    for selector in expired_selectors(settings, now):
        while True:
            batch = index.view().store.find_across_owners([selector], _BATCH)
            if not batch:
                break
            by_owner: dict[Owner, list[str]] = defaultdict(list)
            for point in batch:
                owner = Owner(tenant_id=str(point.payload["tenant_id"]),
                              user_id=str(point.payload["user_id"]))
                by_owner[owner].append(point.id)
            progress = 0
            for owner, ids in by_owner.items():
                done = _purge_owner(index, redis, settings, owner, ids, selector)
                deleted[owner.tenant_id] += done
                progress += done
            if not progress:
                break  # all changed meanwhile; the next run sees them afresh
    total = sum(deleted.values())
    if total:
        log.info("retention_purged", deleted=total, tenants=dict(deleted))
        after_forget(erasure)  # purged text leaves the files within the erasure bound
    return {"deleted": total, "tenants": dict(deleted)}


def _purge_owner(
    index: IndexRouter,
    redis: Redis,
    settings: Settings,
    owner: Owner,
    ids: list[str],
    selector: Condition,
) -> int:
    # Under the user's lock, and re-checked, so a memory updated meanwhile (a new
    # expires_at) is not deleted on a stale read.
    with (user_lock(redis, owner, settings.user_lock_timeout_s, settings.user_lock_wait_s),
          index.writing() as view):
        still = [p.id for p in view.store.find(owner, [IdIn(tuple(ids)), selector], len(ids))]
        if not still:
            return 0
        view.writes.delete(owner, still)
        view.audit.erase_audit_content(owner, still)
        view.audit.append_audit([
            AuditEvent(memory_id=i, tenant_id=owner.tenant_id, user_id=owner.user_id,
                       event=AuditKind.DELETE, actor="retention")
            for i in still
        ])
        return len(still)

"""A tenant's user ids, for the admin page: read from the store, which is the truth."""

from __future__ import annotations

from memoryd.records.schemas import UserPage, UserSummary
from memoryd.store import Store

# Qdrant counts values with a facet, which returns at most this many; a tenant with more
# users sees the first ones by memory count (the page says so with `next_cursor`).
MAX_USERS = 10_000


def list_users(
    store: Store, tenant: str, limit: int, cursor: str | None, prefix: str | None
) -> UserPage:
    """User ids in code-point order, `limit` at a time after `cursor` (the last id seen)."""
    counts = sorted(store.user_counts(tenant, MAX_USERS))
    rows = [
        (user, n) for user, n in counts
        if (cursor is None or user > cursor) and (not prefix or user.startswith(prefix))
    ]
    page = rows[:limit]
    more = len(rows) > limit
    return UserPage(
        items=[UserSummary(user_id=u, memories=n) for u, n in page],
        next_cursor=page[-1][0] if more and page else None,
    )

"""A memory's versions: an update by the LLM path keeps the old version, marked superseded."""

from __future__ import annotations

from memoryd.records.models import Owner
from memoryd.store import Store


def version_chain(store: Store, owner: Owner, memory_id: str, limit: int = 50) -> list[str]:
    """Every version of a memory, oldest first, following supersedes / superseded_by."""
    found = store.get(owner, [memory_id])
    if not found:
        return []
    chain = [memory_id]
    payload = found[0].payload
    back = payload.get("supersedes")
    while back and back not in chain and len(chain) < limit:
        older = store.get(owner, [back])
        if not older:
            break
        chain.insert(0, back)
        back = older[0].payload.get("supersedes")
    forward = payload.get("superseded_by")
    while forward and forward not in chain and len(chain) < limit:
        newer = store.get(owner, [forward])
        if not newer:
            break
        chain.append(forward)
        forward = newer[0].payload.get("superseded_by")
    return chain

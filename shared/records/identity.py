"""Deterministic identities: a retried or duplicated task lands on the same point."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
import uuid
from collections.abc import Mapping
from typing import Any

_NAMESPACE = uuid.UUID("6f1c2d1e-8a51-4c1b-9a7e-6d0b2f4e9c3a")
_SPACE = re.compile(r"\s+")
_TRAILING = re.compile(r"[\s.!?。！？…~～]+$")
_SEP = "\x1f"


def normalize_content(text: str) -> str:
    """The form two contents are compared in: NFKC, casefolded, one space, no end mark."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _TRAILING.sub("", _SPACE.sub(" ", folded).strip())


def content_hash(text: str) -> str:
    return hashlib.sha256(normalize_content(text).encode("utf-8")).hexdigest()


def _uuid(*parts: str | None) -> str:
    return str(uuid.uuid5(_NAMESPACE, _SEP.join(p or "" for p in parts)))


def memory_id(tenant_id: str, user_id: str, scope: str, project: str | None, chash: str) -> str:
    """Id of a saved or extracted fact: one point per distinct content and visible range."""
    return _uuid("content", tenant_id, user_id, scope, project, chash)


def event_id(
    tenant_id: str, user_id: str, scope: str, project: str | None, chash: str, occurred_at: str
) -> str:
    """Id of an episodic memory: the same words at another time are another event."""
    return _uuid("event", tenant_id, user_id, scope, project, chash, occurred_at)


def turn_id(
    tenant_id: str, user_id: str, scope: str, project: str | None, thread_id: str | None,
    role: str, chash: str, occurred_at: str,
) -> str:
    """Id of a turn kept by the default extraction (an episode): in a thread, its role and
    words, so the same turn posted again is one memory; without a thread, its role, words
    and time, as an episodic memory."""
    if thread_id is not None:
        return _uuid("turn", tenant_id, user_id, scope, project, thread_id, role, chash)
    return _uuid("turn", tenant_id, user_id, scope, project, "", role, chash, occurred_at)


def keyed_memory_id(
    tenant_id: str, user_id: str, scope: str, project: str | None, key: str
) -> str:
    """Id of a named slot (`key`): saving under the same key replaces the memory."""
    return _uuid("key", tenant_id, user_id, scope, project, key)


def job_id_for(tenant_id: str, user_id: str, operation: str, idempotency_key: str) -> str:
    """Id of the job an idempotency key names: one per (tenant, user, operation, key).

    Deterministic, so a retry through any gateway lands on the same job; the user and the
    operation are part of it, so two users (or a save and an import) never share a key.
    """
    return _uuid("job", tenant_id, user_id, operation, idempotency_key)


def request_digest(canonical: Mapping[str, Any]) -> str:
    """SHA-256 of a validated request in canonical JSON (sorted keys, no whitespace).

    Callers pass the command without what differs between two sendings of one request
    (its request id and arrival time), so a retry has the digest of the first sending.
    """
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()

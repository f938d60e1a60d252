"""API keys with a tenant and scopes, kept hashed in Redis so every process can read them.

Bootstrap keys (`MEMORYD_API_KEYS`, the embedded `<data-dir>/api-key`) live in the
`KeyRing` built from settings and hold every scope: they are the operator's own. Keys
made with `memoryd keys create` live in Redis: one hash per key under its SHA-256,
plus an index of key ids, so the gateway finds a key in one lookup and revoking it
takes effect on the next request.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

import redis
from pydantic import BaseModel

from shared.auth import KeyRing, key_digest
from shared.errors import Forbidden, InvalidInput, NotFound, Unauthorized
from shared.models import utcnow


class KeyScope(StrEnum):
    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


ALL_SCOPES = frozenset(KeyScope)


@dataclass(frozen=True)
class Principal:
    """Who is calling: the key's id (never the key), its tenant and scopes."""

    key_id: str
    tenant: str
    scopes: frozenset[KeyScope]

    def require(self, needed: Iterable[KeyScope]) -> None:
        missing = sorted(s.value for s in needed if s not in self.scopes)
        if missing:
            raise Forbidden(
                f"this API key lacks the scope {', '.join(missing)} that this endpoint needs",
                field="scope",
            )


class ApiKeyInfo(BaseModel):
    """What `memoryd keys list` shows: never the key or its hash."""

    id: str
    prefix: str
    tenant: str
    scopes: list[KeyScope]
    name: str | None = None
    created_at: datetime
    revoked_at: datetime | None = None


def parse_scopes(spec: str) -> frozenset[KeyScope]:
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        raise InvalidInput("scopes: give one or more of read, write, admin", field="scopes")
    try:
        return frozenset(KeyScope(n) for n in names)
    except ValueError as exc:
        raise InvalidInput(
            f"scopes: {spec!r} holds an unknown scope; use read, write, admin", field="scopes"
        ) from exc


_INDEX = "memoryd:apikeys"  # key id → sha256 of the key


def _text(value: bytes | str | None) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


class ApiKeyStore:
    def __init__(self, client: redis.Redis) -> None:
        self._r = client

    @staticmethod
    def _key(digest: str) -> str:
        return f"memoryd:apikey:{digest}"

    def create(
        self, tenant: str, scopes: frozenset[KeyScope], name: str | None = None
    ) -> tuple[str, ApiKeyInfo]:
        """A new key; the plain key is returned here once and never stored."""
        if not tenant.strip() or any(c.isspace() or c in ",=" for c in tenant):
            raise InvalidInput("tenant: must be non-empty without spaces, ',' or '='",
                               field="tenant")
        if not scopes:
            raise InvalidInput("scopes: give one or more of read, write, admin", field="scopes")
        key = "mk_" + secrets.token_urlsafe(24)
        key_id = "key_" + secrets.token_hex(6)
        info = ApiKeyInfo(id=key_id, prefix=key[:7], tenant=tenant,
                          scopes=sorted(scopes), name=name, created_at=utcnow())
        digest = key_digest(key)
        fields = {"id": key_id, "prefix": info.prefix, "tenant": tenant,
                  "scopes": ",".join(s.value for s in info.scopes), "name": name or "",
                  "created_at": info.created_at.isoformat(), "revoked_at": ""}
        pipe = self._r.pipeline(transaction=True)
        pipe.hset(self._key(digest), mapping=fields)  # type: ignore[arg-type]
        pipe.hset(_INDEX, key_id, digest)
        pipe.execute()
        return key, info

    def _info(self, raw: dict[str, str]) -> ApiKeyInfo:
        return ApiKeyInfo(
            id=raw["id"], prefix=raw.get("prefix", ""), tenant=raw["tenant"],
            scopes=sorted(KeyScope(s) for s in raw.get("scopes", "").split(",") if s),
            name=raw.get("name") or None, created_at=datetime.fromisoformat(raw["created_at"]),
            revoked_at=datetime.fromisoformat(raw["revoked_at"]) if raw.get("revoked_at")
            else None,
        )

    def _raw(self, digest: str) -> dict[str, str]:
        got = self._r.hgetall(self._key(digest))
        return {str(_text(k)): str(_text(v)) for k, v in got.items()}

    def list(self) -> list[ApiKeyInfo]:
        index = self._r.hgetall(_INDEX)
        infos = [self._raw(str(_text(d))) for d in index.values()]
        return sorted((self._info(r) for r in infos if r), key=lambda i: i.created_at)

    def revoke(self, key_id: str) -> ApiKeyInfo:
        digest = _text(self._r.hget(_INDEX, key_id))
        if digest is None:
            raise NotFound(f"no API key {key_id}", field="key_id")
        raw = self._raw(digest)
        if not raw.get("revoked_at"):
            self._r.hset(self._key(digest), "revoked_at", utcnow().isoformat())
            raw = self._raw(digest)
        return self._info(raw)

    def lookup(self, digest: str) -> Principal | None:
        raw = self._raw(digest)
        if not raw or raw.get("revoked_at"):
            return None
        scopes = frozenset(KeyScope(s) for s in raw.get("scopes", "").split(",") if s)
        return Principal(key_id=raw["id"], tenant=raw["tenant"], scopes=scopes)


def bearer_key(authorization: str | None) -> str:
    if not authorization:
        raise Unauthorized("missing Authorization: Bearer <key> header")
    scheme, _, key = authorization.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise Unauthorized("the Authorization header must be 'Bearer <key>'")
    return key.strip()


def bootstrap_principal(keyring: KeyRing, authorization: str | None) -> Principal | None:
    """The principal of a bootstrap key (settings or the embedded key file), without any
    Redis call; None for any other well-formed key."""
    digest = key_digest(bearer_key(authorization))
    tenant = keyring.tenant_of_digest(digest)
    if tenant is None:
        return None
    return Principal(key_id="boot_" + digest[:12], tenant=tenant, scopes=ALL_SCOPES)


def authenticate(keyring: KeyRing, stored: ApiKeyStore, authorization: str | None) -> Principal:
    """Bootstrap keys first (no Redis call), then the keys made with `memoryd keys`."""
    principal = bootstrap_principal(keyring, authorization)
    if principal is not None:
        return principal
    principal = stored.lookup(key_digest(bearer_key(authorization)))
    if principal is None:
        raise Unauthorized("unknown or revoked API key")
    return principal


# Reads that are POSTs (a query body); every other POST, PATCH and DELETE is a write.
_READ_POSTS = frozenset({"/v1/search", "/v1/context"})
# Admin-only: the tenant's failed jobs and re-running them (retry also writes).
_ADMIN: dict[tuple[str, str], frozenset[KeyScope]] = {
    ("GET", "/v1/jobs"): frozenset({KeyScope.ADMIN}),
    ("POST", "/v1/jobs/{job_id}/retry"): frozenset({KeyScope.WRITE, KeyScope.ADMIN}),
}


def required_scopes(method: str, path_template: str) -> frozenset[KeyScope]:
    """The scopes a route needs, from its method and path template: the one rule."""
    method = method.upper()
    if (method, path_template) in _ADMIN:
        return _ADMIN[(method, path_template)]
    if path_template.startswith("/v1/admin/"):
        return frozenset({KeyScope.ADMIN})
    if method in ("GET", "HEAD", "OPTIONS") or path_template in _READ_POSTS:
        return frozenset({KeyScope.READ})
    return frozenset({KeyScope.WRITE})

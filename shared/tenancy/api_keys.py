"""API keys with a tenant and scopes, kept hashed in Redis so every process can read them.

Bootstrap keys (`MEMORYD_API_KEYS`, the embedded `<data-dir>/api-key`) live in the
`KeyRing` built from settings and hold every tenant scope. Keys made with
`memoryd keys create` live in Redis: one hash per key under its SHA-256, plus an index of
key ids, so the gateway finds a key in one lookup and revoking it takes effect on the next
request.

Operator keys (`MEMORYD_OPERATOR_KEYS`, the embedded `<data-dir>/operator-key`,
`memoryd keys create --operator`) hold the one scope `operator` and nothing else: they
reach the store-wide routes (`/v1/admin/*`, which act across tenants) and no tenant's
data. Tenant keys can never hold `operator`, so they get 403 `forbidden` there.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

import redis
from pydantic import BaseModel

from memoryd.platform.errors import Forbidden, InvalidInput, NotFound, Unauthorized
from memoryd.platform.redis_keys import redis_key
from memoryd.records.models import utcnow
from memoryd.tenancy.auth import OPERATOR_TENANT, KeyRing, key_digest, tenant_problem


class KeyScope(StrEnum):
    READ = "read"
    WRITE = "write"
    ADMIN = "admin"
    OPERATOR = "operator"


# Every scope a tenant key can hold; `operator` is never one of them.
ALL_SCOPES = frozenset({KeyScope.READ, KeyScope.WRITE, KeyScope.ADMIN})
OPERATOR_SCOPES = frozenset({KeyScope.OPERATOR})


@dataclass(frozen=True)
class Principal:
    """Who is calling: the key's id (never the key), its tenant and scopes."""

    key_id: str
    tenant: str
    scopes: frozenset[KeyScope]

    def require(self, needed: Iterable[KeyScope]) -> None:
        missing = sorted(s.value for s in needed if s not in self.scopes)
        if KeyScope.OPERATOR.value in missing:
            raise Forbidden(
                "this endpoint acts on the whole store and needs an operator key "
                "(MEMORYD_OPERATOR_KEYS or `memoryd keys create --operator`), not a tenant's "
                "key", field="scope",
            )
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
    """A tenant key's scopes; `operator` is refused here (`keys create --operator`)."""
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        raise InvalidInput("scopes: give one or more of read, write, admin", field="scopes")
    try:
        scopes = frozenset(KeyScope(n) for n in names)
    except ValueError as exc:
        raise InvalidInput(
            f"scopes: {spec!r} holds an unknown scope; use read, write, admin", field="scopes"
        ) from exc
    if not scopes <= ALL_SCOPES:
        raise InvalidInput("scopes: a tenant key cannot hold 'operator'; make an operator key "
                           "with --operator", field="scopes")
    return scopes


_INDEX = redis_key("apikeys")  # key id → sha256 of the key


def _text(value: bytes | str | None) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


class ApiKeyStore:
    def __init__(self, client: redis.Redis) -> None:
        self._r = client

    @staticmethod
    def _key(digest: str) -> str:
        return redis_key("apikey", digest)

    def create(
        self, tenant: str, scopes: frozenset[KeyScope], name: str | None = None
    ) -> tuple[str, ApiKeyInfo]:
        """A new tenant key; the plain key is returned here once and never stored."""
        problem = tenant_problem(tenant)
        if problem is not None:
            raise InvalidInput(f"tenant: {problem}", field="tenant")
        if not scopes:
            raise InvalidInput("scopes: give one or more of read, write, admin", field="scopes")
        if not scopes <= ALL_SCOPES:
            raise InvalidInput("scopes: a tenant key cannot hold 'operator'", field="scopes")
        return self._store(tenant, scopes, name)

    def create_operator(self, name: str | None = None) -> tuple[str, ApiKeyInfo]:
        """A new operator key: the scope `operator` only, under no tenant."""
        return self._store(OPERATOR_TENANT, OPERATOR_SCOPES, name)

    def _store(
        self, tenant: str, scopes: frozenset[KeyScope], name: str | None
    ) -> tuple[str, ApiKeyInfo]:
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
        # Operator and tenant powers never mix, whatever the record says.
        operator = raw["tenant"] == OPERATOR_TENANT
        scopes = scopes & OPERATOR_SCOPES if operator else scopes & ALL_SCOPES
        return Principal(key_id=raw["id"], tenant=raw["tenant"], scopes=scopes)


def bearer_key(authorization: str | None) -> str:
    """The key of an `Authorization: Bearer <key>` header, or 401.

    Keys are printable ASCII (`mk_` + URL-safe base64, or what the operator configured);
    a header with any other character (HTTP servers hand raw bytes over as latin-1) is no
    key of ours, and is refused here, before it reaches hashing, comparison or logs."""
    if not authorization:
        raise Unauthorized("missing Authorization: Bearer <key> header")
    scheme, _, key = authorization.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise Unauthorized("the Authorization header must be 'Bearer <key>'")
    key = key.strip()
    if not (key.isascii() and key.isprintable()):
        raise Unauthorized("the API key holds characters no key has (printable ASCII only)")
    return key


def bootstrap_principal(keyring: KeyRing, authorization: str | None) -> Principal | None:
    """The principal of a bootstrap or operator key from the settings (or the embedded key
    files), without any Redis call; None for any other well-formed key."""
    digest = key_digest(bearer_key(authorization))
    tenant = keyring.tenant_of_digest(digest)
    if tenant is not None:
        return Principal(key_id="boot_" + digest[:12], tenant=tenant, scopes=ALL_SCOPES)
    if keyring.is_operator_digest(digest):
        return Principal(key_id="op_" + digest[:12], tenant=OPERATOR_TENANT,
                         scopes=OPERATOR_SCOPES)
    return None


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
# Admin-only: the tenant's recent and failed jobs and re-running them (retry also writes).
_ADMIN: dict[tuple[str, str], frozenset[KeyScope]] = {
    ("GET", "/v1/jobs"): frozenset({KeyScope.ADMIN}),
    ("POST", "/v1/jobs/{job_id}/retry"): frozenset({KeyScope.WRITE, KeyScope.ADMIN}),
    ("GET", "/v1/jobs/recent"): frozenset({KeyScope.ADMIN}),
}
# Any valid key may ask what it is (the admin page does, to call only what it may use).
WHOAMI = "/v1/whoami"


# A tenant's webhook endpoints send its events (and, if asked, its memories' text) out:
# admin only, reads included.
WEBHOOKS_PREFIX = "/v1/webhooks"
# Store-wide routes: they act on (or describe) every tenant's data at once.
OPERATOR_PREFIX = "/v1/admin/"


def is_operator_route(path_template: str) -> bool:
    return path_template.startswith(OPERATOR_PREFIX)


def required_scopes(method: str, path_template: str) -> frozenset[KeyScope]:
    """The scopes a route needs, from its method and path template: the one rule."""
    method = method.upper()
    if (method, path_template) == ("GET", WHOAMI):
        return frozenset()
    if (method, path_template) in _ADMIN:
        return _ADMIN[(method, path_template)]
    if is_operator_route(path_template):
        return OPERATOR_SCOPES
    if path_template.startswith(WEBHOOKS_PREFIX):
        return frozenset({KeyScope.ADMIN})
    if method in ("GET", "HEAD", "OPTIONS") or path_template in _READ_POSTS:
        return frozenset({KeyScope.READ})
    return frozenset({KeyScope.WRITE})

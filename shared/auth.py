"""API keys → tenants. Keys are looked up by their SHA-256, never held in plain form."""

from __future__ import annotations

import hashlib
import os
import secrets

from shared.errors import ConfigurationError, Unauthorized
from shared.settings import Settings


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def key_digest(key: str) -> str:
    """How a key is identified at rest: its SHA-256, hex."""
    return _digest(key)


def parse_api_keys(spec: str) -> dict[str, str]:
    """`key=tenant,key2=tenant2` → {sha256(key): tenant}."""
    keys: dict[str, str] = {}
    for pair in spec.split(","):
        if not pair.strip():
            continue
        key, sep, tenant = pair.strip().partition("=")
        if not sep or not key.strip() or not tenant.strip():
            raise ConfigurationError("MEMORYD_API_KEYS must hold comma-separated key=tenant pairs")
        keys[_digest(key.strip())] = tenant.strip()
    if not keys:
        raise ConfigurationError("MEMORYD_API_KEYS holds no key")
    return keys


def ensure_embedded_key(settings: Settings) -> str:
    """The embedded stack's key for tenant `default`: generated once, kept in the data dir."""
    path = settings.api_key_file
    if path.exists():
        key = path.read_text().strip()
        if key:
            return key
    path.parent.mkdir(parents=True, exist_ok=True)
    key = "mk_" + secrets.token_urlsafe(24)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key + "\n")
    return key


class KeyRing:
    def __init__(self, keys: dict[str, str]) -> None:
        self._keys = keys

    @classmethod
    def from_settings(cls, settings: Settings, embedded: bool) -> KeyRing:
        if settings.api_keys is not None:
            return cls(parse_api_keys(settings.api_keys.get_secret_value()))
        if embedded:
            return cls({_digest(ensure_embedded_key(settings)): "default"})
        raise ConfigurationError("set MEMORYD_API_KEYS (key=tenant pairs) in server mode")

    def tenant_of_digest(self, digest: str) -> str | None:
        return self._keys.get(digest)

    def tenant_for(self, authorization: str | None) -> str:
        if not authorization:
            raise Unauthorized("missing Authorization: Bearer <key> header")
        scheme, _, key = authorization.partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise Unauthorized("the Authorization header must be 'Bearer <key>'")
        tenant = self._keys.get(_digest(key.strip()))
        if tenant is None:
            raise Unauthorized("unknown API key")
        return tenant

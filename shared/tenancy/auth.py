"""API keys → tenants, and operator keys. Keys are looked up by their SHA-256, never held
in plain form."""

from __future__ import annotations

import hashlib
import re
import secrets
from pathlib import Path

from memoryd.platform.errors import ConfigurationError, Unauthorized
from memoryd.platform.private_dirs import make_private_dir, write_private_file
from memoryd.platform.settings import Settings

# The pseudo-tenant of operator keys: store-wide jobs (re-embedding) are recorded under it.
# No tenant key may name it, so no tenant can read those jobs.
OPERATOR_TENANT = "(operator)"


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def key_digest(key: str) -> str:
    """How a key is identified at rest: its SHA-256, hex."""
    return _digest(key)


# A tenant name: what keys, job records and Redis keys are filed under. Letters, digits,
# `.`, `_` and `-`, starting with a letter or digit: no `:` (which once let tenant `a:b`
# share Redis keys with tenant `a`; shared/platform/redis_keys.py now encodes it anyway),
# no space, `,` or `=` (the MEMORYD_API_KEYS syntax), nothing invisible.
TENANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
TENANT_RULE = ("1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit "
               "(no ':')")


def tenant_problem(name: str) -> str | None:
    """Why `name` cannot be a tenant's; None when it can."""
    if name == OPERATOR_TENANT:
        return f"{OPERATOR_TENANT!r} is reserved for operator keys"
    if TENANT_NAME.fullmatch(name) is None:
        return f"{name!r} is not a tenant name: use {TENANT_RULE}"
    return None


def _usable(key: str) -> bool:
    """What `api_keys.bearer_key` accepts from a request: printable ASCII, no space."""
    return key.isascii() and key.isprintable() and " " not in key


def parse_api_keys(spec: str) -> dict[str, str]:
    """`key=tenant,key2=tenant2` → {sha256(key): tenant}."""
    keys: dict[str, str] = {}
    for pair in spec.split(","):
        if not pair.strip():
            continue
        key, sep, tenant = pair.strip().partition("=")
        if not sep or not key.strip() or not tenant.strip():
            raise ConfigurationError("MEMORYD_API_KEYS must hold comma-separated key=tenant pairs")
        if not _usable(key.strip()):
            raise ConfigurationError("MEMORYD_API_KEYS: a key must be printable ASCII without "
                                     "spaces (a request could never present it)")
        if tenant.strip() == OPERATOR_TENANT:
            raise ConfigurationError(
                f"MEMORYD_API_KEYS: the tenant name {OPERATOR_TENANT!r} is reserved; "
                "operator keys go in MEMORYD_OPERATOR_KEYS")
        problem = tenant_problem(tenant.strip())
        if problem is not None:
            raise ConfigurationError(f"MEMORYD_API_KEYS: {problem}")
        keys[_digest(key.strip())] = tenant.strip()
    if not keys:
        raise ConfigurationError("MEMORYD_API_KEYS holds no key")
    return keys


def parse_operator_keys(spec: str) -> frozenset[str]:
    """`key1,key2` → their SHA-256 digests. A `key=tenant` pair is refused: an operator key
    belongs to no tenant, and a pasted tenant pair would otherwise become an operator key."""
    digests = set()
    for key in (k.strip() for k in spec.split(",")):
        if not key:
            continue
        if "=" in key:
            raise ConfigurationError(
                "MEMORYD_OPERATOR_KEYS holds comma-separated keys without tenants (no '=')")
        if not _usable(key):
            raise ConfigurationError("MEMORYD_OPERATOR_KEYS: a key must be printable ASCII "
                                     "without spaces (a request could never present it)")
        digests.add(_digest(key))
    return frozenset(digests)


def _ensure_key_file(path: Path) -> str:
    """A key generated once and kept in `path` (mode 0600, its directory 0700)."""
    if path.exists():
        key = path.read_text().strip()
        if key:
            return key
    make_private_dir(path.parent)
    key = "mk_" + secrets.token_urlsafe(24)
    write_private_file(path, key + "\n")
    return key


def ensure_embedded_key(settings: Settings) -> str:
    """The embedded stack's key for tenant `default`: generated once, kept in the data dir."""
    return _ensure_key_file(settings.api_key_file)


def ensure_embedded_operator_key(settings: Settings) -> str:
    """The embedded stack's operator key (store-wide routes), kept in the data dir, 0600."""
    return _ensure_key_file(settings.operator_key_file)


def _configured(secret: object) -> str:
    value = getattr(secret, "get_secret_value", lambda: "")()
    return str(value).strip()


class KeyRing:
    def __init__(self, keys: dict[str, str], operators: frozenset[str] = frozenset()) -> None:
        self._keys = keys
        self._operators = operators
        if operators & keys.keys():
            raise ConfigurationError("a key is both a tenant key and an operator key")

    @classmethod
    def from_settings(cls, settings: Settings, embedded: bool) -> KeyRing:
        operator_spec = _configured(settings.operator_keys)
        if operator_spec:
            operators = parse_operator_keys(operator_spec)
        elif embedded:
            operators = frozenset({_digest(ensure_embedded_operator_key(settings))})
        else:
            operators = frozenset()  # no operator: every store-wide route answers 403
        if settings.api_keys is not None:
            return cls(parse_api_keys(settings.api_keys.get_secret_value()), operators)
        if embedded:
            return cls({_digest(ensure_embedded_key(settings)): "default"}, operators)
        raise ConfigurationError("set MEMORYD_API_KEYS (key=tenant pairs) in server mode")

    def tenant_of_digest(self, digest: str) -> str | None:
        return self._keys.get(digest)

    def is_operator_digest(self, digest: str) -> bool:
        return digest in self._operators

    @property
    def has_operator(self) -> bool:
        return bool(self._operators)

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

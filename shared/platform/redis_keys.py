"""Every Redis key memoryd writes, built by one function with one encoding.

A key is `memoryd:` then its parts joined by `:`, each part with `%` written `%25` and `:`
written `%3A`. No encoded part contains `:`, so a key splits back into exactly the parts
it was built from: tenant `a:b` with user `c` and tenant `a` with user `b:c` get different
keys (they used to share `...:a:b:c`, and one tenant's forget blanked the other's jobs).
A part without `%` or `:` is unchanged, so the keys of every ordinary tenant, user and
job id are byte for byte what earlier versions wrote and their state is still read.

Lua scripts that build a key from a hash field (a job's tenant and user) use
`LUA_KEY_PART`, the same encoding in Lua; `tests/shared/platform/test_redis_keys.py`
checks the two agree.
"""

from __future__ import annotations

NAMESPACE = "memoryd"


def key_part(value: str) -> str:
    """One part, encoded so that it contains no `:`."""
    return value.replace("%", "%25").replace(":", "%3A")


def redis_key(*parts: str) -> str:
    """The key of these parts: `redis_key("lock", tenant, user)`."""
    return ":".join([NAMESPACE, *(key_part(p) for p in parts)])


def key_prefix(*parts: str) -> str:
    """The start of the keys `redis_key(*parts, ...)`, for Lua to append encoded parts to."""
    return redis_key(*parts) + ":"


# `key_part` in Lua. In a gsub pattern `%%` is a literal `%`; in a replacement `%%` writes one.
LUA_KEY_PART = """
local function key_part(s)
  local encoded = string.gsub(string.gsub(s, '%%', '%%25'), ':', '%%3A')
  return encoded
end
"""

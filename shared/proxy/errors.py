"""The proxy's own errors; the upstream's errors are passed through, not wrapped."""

from __future__ import annotations

from memoryd.platform.errors import AppError


class ProxyNotConfigured(AppError):
    """No upstream is configured (MEMORYD_PROXY_UPSTREAM_URL): nothing to forward to.

    A 4xx, not a 503: no retry can succeed until an operator sets it, and OpenAI clients
    retry a 5xx on their own."""

    code = "proxy_not_configured"
    status = 404


class UpstreamUnreachable(AppError):
    """The upstream refused the connection, or it broke before an answer started."""

    code = "upstream_unreachable"
    status = 502


class UpstreamTimeout(AppError):
    """The upstream did not answer within MEMORYD_PROXY_TIMEOUT_S."""

    code = "upstream_timeout"
    status = 504

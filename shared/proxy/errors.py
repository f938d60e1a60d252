"""The proxy's own errors; the upstream's errors are passed through, not wrapped."""

from __future__ import annotations

from shared.platform.errors import AppError


class ProxyNotConfigured(AppError):
    """No upstream is configured (MEMORYD_PROXY_UPSTREAM_URL): nothing to forward to."""

    code = "proxy_not_configured"
    status = 503


class UpstreamUnreachable(AppError):
    """The upstream refused the connection, or it broke before an answer started."""

    code = "upstream_unreachable"
    status = 502


class UpstreamTimeout(AppError):
    """The upstream did not answer within MEMORYD_PROXY_TIMEOUT_S."""

    code = "upstream_timeout"
    status = 504

"""The installed package's version: what `serverInfo.version` (MCP), the OpenAPI document
and `memoryd --version` report.

Read from the distribution's metadata (pyproject.toml's `version`), so it is written in one
place; a checkout imported without being installed reports `0+unknown` rather than failing.
"""

from __future__ import annotations

from importlib import metadata

DISTRIBUTION = "memoryd"


def package_version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "0+unknown"

"""ops/Dockerfile read as instructions, for the tests that check what it runs and copies."""

from __future__ import annotations

import re
import shlex


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with line continuations joined."""
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def copied_sources(text: str) -> list[str]:
    """What the Dockerfile copies from the build context (not from another stage), in
    order, as written: a wildcard source keeps its wildcard."""
    sources: list[str] = []
    for word, rest in instructions(text):
        if word != "COPY" or "--from=" in rest:
            continue
        *found, _dest = [part for part in shlex.split(rest) if not part.startswith("--")]
        sources += found
    return sources

"""Directories that hold keys, passwords and memories: created readable by their owner only."""

from __future__ import annotations

import os
from pathlib import Path


def make_private_dir(path: Path) -> Path:
    """Create `path` and every missing parent with mode 0700 (whatever the umask); a
    directory that already exists is left as it is (the operator chose its mode)."""
    path = Path(path).expanduser()
    missing: list[Path] = []
    current = path
    while not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            continue  # made meanwhile by another process: its mode is its maker's
        os.chmod(directory, 0o700)  # mkdir's mode is masked by the umask
    return path


def write_private_file(path: Path, text: str) -> None:
    """Write `text` to `path` with mode 0600 from the first byte (no window where another
    user could read it), replacing what was there."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an existing file keeps its mode under O_CREAT
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)

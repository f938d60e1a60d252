"""Shared libraries this process has loaded (Linux), for the few native knobs memoryd sets:
the e5 engine's OpenMP team sizes and numpy's OpenBLAS thread count."""

from __future__ import annotations

from pathlib import Path


def loaded_libraries(fragment: str) -> list[str]:
    """Paths of the loaded libraries whose path contains `fragment` (case-insensitive)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    wanted = fragment.lower()
    return sorted({line.split()[-1] for line in maps.splitlines()
                   if wanted in line.lower() and line.split()[-1].startswith("/")})

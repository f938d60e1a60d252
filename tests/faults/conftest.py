"""The fault scenarios live in `ops/` (shared with `ops/chaos.py`): make the project root
importable however pytest was started."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

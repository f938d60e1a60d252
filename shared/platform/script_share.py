"""How Chinese a text is: the share of its letters that are ideographs.

The embedder's cosines depend on the languages of the two texts (two Chinese texts sit
closer than two English ones, a Chinese and an English text further apart), so search
reads this share of the query and of each memory (`shared/retrieval/scoring.py`).
"""

from __future__ import annotations

import re

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")


def cjk_share(text: str) -> float:
    """In [0, 1]: one ideograph counts as much as a short word of three Latin letters;
    a text with neither (digits, emoji) counts as 0."""
    cjk, latin = len(_CJK.findall(text)), len(_LATIN.findall(text))
    return 3 * cjk / (3 * cjk + latin) if cjk or latin else 0.0

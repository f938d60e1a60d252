"""Does a user message ask, explicitly, to forget something? (Chinese and English.)

Only then may the model's DELETE be applied. Past-tense forgetting ("I forgot my keys",
"我忘了带钥匙") is not a request.
"""

from __future__ import annotations

import re

_EN = re.compile(
    r"(?ix)"
    r"\b(?:please\s+|pls\s+|can\s+you\s+|could\s+you\s+|you\s+can\s+|just\s+)?"
    r"(?:forget\s+(?:about\s+|that|this|it|what|my|the|everything|all|i\b|we\b)"
    r"|(?:delete|remove|erase|wipe|drop|clear)\s+(?:that|this|it|what|my|the|all|everything)\b"
    r"|(?:don'?t|do\s+not|stop|no\s+longer|never)\s+(?:remember|keep|store|save)(?:ing)?\b"
    r"|(?:un-?remember)\b)"
)
_ZH = re.compile(
    r"(?:忘掉|忘记(?:我|这|那|它|关于|掉|吧|刚才|之前|以前)|把.{0,30}?(?:忘了|忘掉|忘记|删了|删掉|删除)"
    r"|(?:删除|删掉|去掉|清除|抹掉|抹去)(?:我|这|那|它|关于|刚才|之前|以前|掉)"
    r"|(?:别|不要|不用|不必|无需|请勿)(?:再)?(?:记|保存|存)"
    r"|不再需要记)"
)


def has_forget_intent(text: str) -> bool:
    return bool(_EN.search(text) or _ZH.search(text))

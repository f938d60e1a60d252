"""Whose words a query asks about: the user's own, or the assistant's earlier ones.

A chat's episodes hold both sides: assistant turns are kept, marked by role, because users
ask "what did you recommend last time?". An assistant's reply restates and elaborates the
user's topic, so its text sits close to any question on that topic, and a long reply meets
it in many places; but it is not evidence of what the user did, owns, said or likes. On
LongMemEval's development half, long assistant replies were 100 of the 116 memories ranked
above a question's first evidence in dense search
(docs/decisions/0034-a-question-about-oneself.md).

So a question in the first person ("where did I meet Sophia?", "我的猫叫什么?") asks about
the user's own words (`about_own_words`), unless it points at the assistant's earlier words
("the trail you recommended", "how many eggs did you say", "our previous conversation",
"你上次推荐的", "你说过"). A request ("can you recommend…", "你推荐什么?") is not such a
pointer: it asks for new words, and the user's own (a preference, a plan) answer it best.
Nothing here reads who the memories are about, only the query; third-person questions
("What did Melanie paint?") ask about no one's words in particular.

Regular expressions of bounded repetition over the query's current turn
(`Query.asks`, at most `QUERY_TAIL_CHARS`), so hostile text costs linear time.
"""

from __future__ import annotations

import re

# The user speaking of themself. Chinese: 我 in any word (我的, 我们家, 给我).
_SELF = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself)\b|我", re.IGNORECASE)

_TOLD = (r"recommended|suggested|said|mentioned|told|gave|provided|listed|wrote|shared|"
         r"proposed|advised|explained|described|named|offered|showed|sent|pointed out|"
         r"came up with|talked about")
_TELL = (r"say|recommend|suggest|mention|tell|give|provide|list|write|share|propose|advise|"
         r"explain|describe|name|call|offer|show|send|talk about")
# The assistant's earlier words: past tense of telling, a question about what it told
# ("did you say"), or the earlier conversation itself. At most one word between.
_ASSISTANT = re.compile(
    rf"\byou(?:'ve|'d| have| had| were)?\s+(?:\w+\s+)?(?:{_TOLD})\b"
    rf"|\b(?:did|didn't|had)\s+you\s+(?:\w+\s+)?(?:{_TELL})\b"
    r"|\byou\s+were\s+(?:telling|saying|recommending|suggesting)\b"
    r"|\b(?:our|the|that)\s+(?:previous|last|earlier|past|prior|recent|other)\s+"
    r"(?:conversation|chat|discussion|session|talk|exchange)s?\b"
    r"|\b(?:we|you and i)\s+(?:\w+\s+)?(?:talked|discussed|chatted|spoke)\b"
    r"|\b(?:did|didn't)\s+(?:we|you and i)\s+(?:\w+\s+)?(?:talk|discuss|chat|speak)\b"
    r"|\byour\s+(?:earlier|previous|last|past|prior)\s+\w+"
    # Chinese: 你之前/上次/刚才…, 你说过/推荐的/提到了我…, 我们上次聊的, 上次的对话.
    r"|你(?:之前|上次|刚才|刚刚|以前|那次|那天|早先|曾经|曾)"
    r"|你(?:说|推荐|建议|提到|提|告诉|给|列|讲|介绍|写|发)(?:过|的|了我)"
    r"|(?:我们|咱们)(?:之前|上次|刚才|以前|那次)?(?:聊|说|谈|讨论)(?:过|的)"
    r"|(?:上次|之前|以前)的?(?:聊天|对话|谈话)",
    re.IGNORECASE,
)


def about_own_words(text: str) -> bool:
    """Whether `text` (a query's current turn) asks about the user's own words: it is in
    the first person and does not point at the assistant's earlier words. Search then
    weighs what the assistant said below what the user said (`scoring.relevance`)."""
    return _SELF.search(text) is not None and _ASSISTANT.search(text) is None

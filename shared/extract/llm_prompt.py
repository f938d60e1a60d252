"""What the extraction model and the conflict judge are sent.

Existing memories appear under short aliases (m1, m2, …): the model can only point at
memories it was shown, and never sees or invents a store id. Assistant turns are context:
the rules say so, and each one is labelled as the assistant's in the transcript.
"""

from __future__ import annotations

import json
from datetime import datetime

from shared.llm.base import ChatMessage
from shared.models import MemoryRecord, Role
from shared.schemas import Message

EXTRACT_RULES = """You maintain long-term memories about a user of a chat assistant.
Read the conversation and decide which memory operations to make.

Rules:
- Only what the USER says about themselves, their life, preferences, plans, projects or
  instructions becomes a memory. Assistant messages are context only: never store a claim
  the assistant made as a fact about the user.
- Write each memory as a short standalone statement in the language the user used
  (Chinese stays Chinese, English stays English).
- ADD a new memory; UPDATE an existing one (target = its alias) when the user changes or
  corrects it; DELETE one (target = its alias) only when the user explicitly asks you to
  forget it; IGNORE small talk.
- Use only the aliases listed under existing memories as targets.
- Text like [EMAIL] or [PASSWORD] is redacted: never try to restore it.
- confidence is 0..1: how sure you are the user stated this about themselves.

Reply with one JSON object only:
{"operations": [{"action": "ADD|UPDATE|DELETE|IGNORE",
  "type": "semantic|episodic|procedural",
  "category": "preference|fact|event|task|skill",
  "content": "...", "target": "m1", "confidence": 0.9, "importance": 1-10}]}
"""

JUDGE_RULES = """You compare a user's existing memory with a new statement from the same user.
Decide one of:
- "same_fact": both say the same thing;
- "update_old": the new statement replaces the old one (it changed or was corrected);
- "conflict": they contradict each other and it is unclear which holds;
- "unrelated": they are about different things.
Reply with one JSON object only: {"decision": "same_fact|update_old|conflict|unrelated"}
"""


def extraction_messages(
    messages: list[Message], when: datetime, aliases: dict[str, MemoryRecord],
) -> list[ChatMessage]:
    existing = [
        {"id": alias, "content": record.content, "type": record.type.value,
         "date": record.occurred_at.date().isoformat()}
        for alias, record in aliases.items()
    ]
    transcript = "\n".join(
        f"{'USER' if m.role is Role.USER else 'ASSISTANT (context only)'}: {m.content}"
        for m in messages if m.role in (Role.USER, Role.ASSISTANT)
    )
    user = (
        f"Interaction time: {when.isoformat()}\n\n"
        f"Existing memories (most similar first):\n"
        f"{json.dumps(existing, ensure_ascii=False, indent=0) if existing else '[]'}\n\n"
        f"Conversation:\n{transcript}"
    )
    return [ChatMessage("system", EXTRACT_RULES), ChatMessage("user", user)]


def judge_messages(existing: str, new: str) -> list[ChatMessage]:
    user = json.dumps({"existing_memory": existing, "new_statement": new}, ensure_ascii=False)
    return [ChatMessage("system", JUDGE_RULES), ChatMessage("user", user)]


def retry_note(error: str) -> ChatMessage:
    return ChatMessage(
        "user", f"Your previous reply could not be used ({error}). Reply with the JSON object only."
    )

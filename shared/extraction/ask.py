"""Ask for a JSON object, re-asking a bounded number of times when the reply is unusable."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from memoryd.extraction.llm_prompt import retry_note
from memoryd.extraction.redaction import redact
from memoryd.extraction.reply_parsing import parse_json_object
from memoryd.llm.base import ChatClient, ChatMessage
from memoryd.platform.errors import LLMReplyInvalid

T = TypeVar("T")
REPLY_KEPT_CHARS = 2000


def ask_json(
    client: ChatClient, messages: list[ChatMessage], retries: int,
    check: Callable[[dict[str, Any]], T], what: str,
) -> T:
    """`check` turns the parsed object into the answer or raises ValueError.

    After `retries` re-asks the job fails permanently; the last reply, redacted, is kept.
    """
    conversation = list(messages)
    reply = ""
    problem = ""
    for _ in range(retries + 1):
        reply = client.chat(conversation)
        try:
            return check(parse_json_object(reply))
        except ValueError as exc:
            problem = str(exc).splitlines()[0][:200]
        conversation = [*messages, ChatMessage("assistant", reply[:REPLY_KEPT_CHARS]),
                        retry_note(problem)]
    raise LLMReplyInvalid(
        f"the {what} reply was unusable after {retries + 1} attempts: {problem}",
        reply=redact(reply)[:REPLY_KEPT_CHARS],
    )

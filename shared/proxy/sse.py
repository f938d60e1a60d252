"""Reading a streamed chat completion as it passes: the assistant's text, and whether it
ended. The bytes themselves are forwarded untouched; this only watches them."""

from __future__ import annotations

import json

DONE = "[DONE]"


class StreamWatch:
    """Fed the upstream's bytes in order, as they arrive; keeps the first choice's deltas.

    Server-sent events are lines; a `data:` line carries one JSON chunk, and `data: [DONE]`
    ends a chat-completions stream. A line split across two reads is joined first.
    """

    def __init__(self) -> None:
        self._pending = b""
        self._parts: list[str] = []
        self.done = False  # `data: [DONE]` seen
        self.finished = False  # a chunk carried a finish_reason

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def feed(self, data: bytes) -> None:
        lines = (self._pending + data).split(b"\n")
        self._pending = lines.pop()
        for line in lines:
            self._line(line.rstrip(b"\r").decode("utf-8", "replace"))

    def close(self) -> None:
        """The stream ended: a last line without its line break still counts."""
        if self._pending:
            self._line(self._pending.rstrip(b"\r").decode("utf-8", "replace"))
            self._pending = b""

    def _line(self, line: str) -> None:
        if not line.startswith("data:"):
            return  # comments (": keep-alive"), event names, blank separators
        payload = line[5:].strip()
        if payload == DONE:
            self.done = True
            return
        try:
            chunk = json.loads(payload)
        except ValueError:
            return
        choices = chunk.get("choices") if isinstance(chunk, dict) else None
        if not isinstance(choices, list):
            return
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            content = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(content, str):
                self._parts.append(content)
            if choice.get("finish_reason"):
                self.finished = True

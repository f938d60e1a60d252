"""How a search query's text is read before it is embedded.

A multi-line query is a conversation excerpt (`POST /v1/context` builds one: earlier user
turns, then the current one); its last line is the current turn, which search
embeds once more on its own. Chat servers often pass transcript lines as they show them,
`<Name>: "text"` or `Name: text`: the current turn is embedded without its speaker label
and quotes (they are layout, and the speaker is known). The excerpt as a whole keeps its
labels: there they say who said what, and stripping them lowered MADial recall
(docs/retrieval.md). Labels are recognised only when every line carries one, so ordinary text
with a colon is never touched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memoryd.platform.script_share import cjk_share

# A speaker label: "<Bart>:", "Bart:", "用户：", "Assistant :" — a short name, then a colon.
_LABEL = re.compile(r"^\s*(?:<([^<>\n]{1,32})>|([^\s:：<>\"“”]{1,24}))\s*[:：]\s*")
_QUOTES = "\"'“”‘’「」『』"


@dataclass(frozen=True, slots=True)
class QueryText:
    """A query: `full` as given, and its non-empty lines with speaker labels removed."""

    full: str
    lines: tuple[str, ...]

    @property
    def current(self) -> str:
        return self.lines[-1] if self.lines else self.full

    @property
    def is_excerpt(self) -> bool:
        return len(self.lines) > 1


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] in _QUOTES and text[-1] in _QUOTES:
        return text[1:-1].strip()
    return text


def read_query(query: str) -> QueryText:
    lines = [line.strip() for line in query.splitlines() if line.strip()]
    if len(lines) > 1:
        matches = [_LABEL.match(line) for line in lines]
        if all(m is not None and m.end() < len(line) for m, line in zip(matches, lines,
                                                                          strict=True)):
            lines = [_unquote(line[m.end():]) for m, line in zip(matches, lines, strict=True)
                     if m is not None]
            lines = [line for line in lines if line]
    return QueryText(query, tuple(lines))


# How much of a query's end is read for its language and time cues: the end holds the
# current turn, and a bounded read keeps hostile text cheap.
QUERY_TAIL_CHARS = 2000


@dataclass(frozen=True, slots=True)
class Query:
    """A search query, read once (`Query.read`) and handed to every step that needs it:

    - `full`: as given; the dense side embeds it, the keyword side tokenizes it;
    - `said`: its lines without speaker labels (what the keyword bridge translates);
    - `current`: an excerpt's current turn, which both sides weigh more; None for a
      one-line query;
    - `asks`: the current turn of the query's last `QUERY_TAIL_CHARS`, where time cues are
      read (an excerpt's earlier lines, "我现在很开心", only tell);
    - `chinese`: the share of Chinese in that tail's lines (speaker labels are layout, not
      the query's language), for the dense side's language offset.
    """

    full: str
    said: tuple[str, ...]
    current: str | None
    asks: str
    chinese: float

    @classmethod
    def read(cls, query: str) -> Query:
        whole = read_query(query)
        # A query within the tail is its own tail: read once.
        tail = whole if len(query) <= QUERY_TAIL_CHARS else read_query(
            query[-QUERY_TAIL_CHARS:])
        return cls(query, whole.lines, whole.current if whole.is_excerpt else None,
                   tail.current, cjk_share(" ".join(tail.lines)))

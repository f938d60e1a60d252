"""POST /v1/context: the memories worth adding to a prompt, as one block within a token budget.

A search (query plus the latest user turns), minus what the conversation already shows,
written in the user's language and packed most relevant first until the budget is spent.
"""

from __future__ import annotations

from shared.memories import reads
from shared.records.models import Owner, Role
from shared.records.schemas import (
    BlockLanguage,
    ContextItem,
    ContextLanguage,
    ContextRequest,
    ContextResponse,
    Message,
    SearchHit,
    SearchRequest,
)
from shared.retrieval.context_block import detect_language, format_line, pack
from shared.retrieval.context_tokens import TokenCounter, default_counter

# The search sees the query and up to this many of the latest user turns, within this many
# characters: enough to resolve "what about her?", short enough to stay about the query.
SEARCH_USER_TURNS = 2
SEARCH_QUERY_CHARS = 1000


def user_turns(messages: list[Message] | None) -> list[str]:
    return [m.content for m in messages or [] if m.role is Role.USER]


def _squash(text: str) -> str:
    return " ".join(text.split())


def search_query(query: str, messages: list[Message] | None) -> str:
    """The latest user turns that add to the query, in order, then the query, bounded.

    The query goes last: search reads a multi-line query as a conversation excerpt whose
    last line is the current turn. A turn adds nothing when the query already contains it
    (the client often sends the current turn both ways). The query itself is never cut.
    """
    parts: list[str] = []
    room = SEARCH_QUERY_CHARS - len(query)
    seen = _squash(query).casefold()
    for turn in reversed(user_turns(messages)[-SEARCH_USER_TURNS:]):
        text = _squash(turn)
        if room <= 1 or not text or text.casefold() in seen:
            continue
        text = text[: room - 1]  # the 1 is the line break that joins it
        parts.append(text)
        room -= len(text) + 1
    return "\n".join([*reversed(parts), query])


def not_yet_shown(hits: list[SearchHit], messages: list[Message] | None) -> list[SearchHit]:
    """Hits whose content is not verbatim (up to spacing) in a recent message of any role."""
    shown = [_squash(m.content) for m in messages or []]
    return [h for h in hits if not any(_squash(h.memory.content) in s for s in shown)]


def block_language(req: ContextRequest) -> BlockLanguage:
    if req.language is ContextLanguage.AUTO:
        return detect_language(req.query, user_turns(req.recent_messages))
    return BlockLanguage(req.language.value)


def build_context(
    rp: reads.ReadPath, owner: Owner, req: ContextRequest, counter: TokenCounter | None = None
) -> ContextResponse:
    counter = counter or default_counter()
    found = reads.search(
        rp,
        owner,
        SearchRequest(
            user_id=req.user_id,
            query=search_query(req.query, req.recent_messages),
            top_k=req.top_k,
            min_score=req.min_score,
            scope=req.scope,
            project=req.project,
            types=req.types,
            tags=req.tags,
        ),
    )
    hits = not_yet_shown(found.results, req.recent_messages)
    # Search returns hits best first; the block keeps that order, so the model reads the most
    # relevant memory first and a tight budget drops the least relevant ones.
    hits.sort(key=lambda h: h.score, reverse=True)
    language = block_language(req)
    packed = pack(
        language,
        ((h, format_line(h.memory.content, h.memory.occurred_at)) for h in hits),
        req.token_budget,
        counter.count,
    )
    return ContextResponse(
        block=packed.block,
        language=language,
        tokens=packed.tokens,
        token_budget=req.token_budget,
        tokenizer=counter.name,
        items=[ContextItem(memory=h.memory, score=h.score, label=h.label) for h in packed.kept],
        omitted=packed.omitted,
    )

"""POST /v1/context: the memories worth adding to a prompt, as one block within a token budget.

One pass: a search (the query plus the latest user turns), minus what the conversation
already shows; then what enters is decided against this user's own candidates (`admitted`);
then the block is written: facts and notes first, then the episodes (messages kept
verbatim), each followed by the next turn it brought along; a long episode is quoted by the
passage that matched, and an episode whose facts are already in the block is left out
unless it adds something. The budget is spent most relevant first.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from memoryd.embeddings.parts import passages_of
from memoryd.extraction.topics import fact_reading
from memoryd.memories import reads
from memoryd.records.models import MemoryKind, Owner, Role
from memoryd.records.schemas import (
    BlockLanguage,
    ContextItem,
    ContextLanguage,
    ContextRequest,
    ContextResponse,
    Message,
    SearchHit,
    SearchRequest,
)
from memoryd.retrieval.context_block import detect_language, episode_line, format_line, pack
from memoryd.retrieval.context_tokens import TokenCounter, default_counter

# The search sees the query and up to this many of the latest user turns, within this many
# characters: enough to resolve "what about her?", short enough to stay about the query.
SEARCH_USER_TURNS = 2
SEARCH_QUERY_CHARS = 1000

# What enters the block (`admitted`), on the calibrated score (`memoryd.retrieval.scoring`):
# - the best hit opens the block when it reaches `OPENS`. Measured on MADial zh's candidate
#   lists (docs/decisions/0027-what-enters-the-context-block.md), the best hit's own score
#   tells a user who has the evidence from one who has not far better (AUC 0.84) than how
#   far it stands out from the user's other candidates (0.62-0.66), so the gate is the
#   calibrated score, set a little below "relevant" (0.5): a right answer that scores
#   lower for want of shared words still opens the block, and a user without the
#   evidence still gets an empty one;
# - the others enter while they stay within `FALLOFF` of the best, on the logit (the scale
#   the calibration is linear on): how far they fall from the best decides, not an absolute
#   cut, and the token budget then keeps the best of them;
# - a user with fewer than `FEW` memories in reach gets the best whatever its score: the
#   few there are cost little room, and e5-small scores short paraphrases and crossed
#   languages low (README's example ranks first at 0.10).
OPENS = 0.44
FALLOFF = 2.0
FEW = 5
# An episode whose words the block's facts drawn from it already hold (this share of its
# words) adds nothing, and leaves its place to other evidence.
COVERED = 0.6


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


def _logit(score: float) -> float:
    p = min(max(score, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def admitted(hits: Sequence[SearchHit], min_score: float | None = None,
             unweighted: Mapping[str, float] | None = None) -> list[SearchHit]:
    """The hits (not next turns) that may enter the block, best first: see `OPENS`,
    `FALLOFF` and `FEW`. `hits` are all the candidates the search returned for this user.
    `min_score`, when the caller sets it, is the rule instead: every hit that reaches it
    (0 asks for all of them), as before the default rule existed. The gate reads each
    hit's score before the speaker weighed it (`unweighted`, by id): whether the user holds
    anything on the question does not depend on who said it, and what enters first does
    (`reads.Found.unweighted`)."""
    ranked = sorted((h for h in hits if h.context_of is None), key=lambda h: -h.score)
    if min_score is not None:
        return [h for h in ranked if h.score >= min_score]
    before = unweighted or {}
    # A weighed reply brought along as the next turn of the user's words counts too.
    opens = max((before.get(h.memory.id, h.score) for h in hits
                 if h.context_of is None or h.memory.id in before), default=0.0)
    if not ranked or (opens < OPENS and len(ranked) >= FEW):
        return []
    floor = _logit(ranked[0].score) - FALLOFF
    return [h for h in ranked if _logit(h.score) >= floor]


_WORDS = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]|[^\W_]+")


def _words(text: str) -> set[str]:
    return {w.casefold() for w in _WORDS.findall(text)}


def adds_something(episode: SearchHit, facts: Sequence[SearchHit]) -> bool:
    """Whether an episode says more than the facts drawn from it that the block holds."""
    own = _words(episode.memory.content)
    if not own:
        return False
    held: set[str] = set()
    for fact in facts:
        held |= _words(fact.memory.content)
    return len(own & held) / len(own) < COVERED


def matched_passages(
    rp: reads.ReadPath, owner: Owner, hits: Sequence[SearchHit], vector: np.ndarray | None,
) -> dict[str, str]:
    """A long memory's passage nearest the query (the one its MaxSim search score came
    from), by id; short memories, and any whose passages cannot be read, are quoted whole.
    A fact's parts end with its topic reading (`extraction.topics`), which is no passage of
    its text: only the passages' rows are compared."""
    if vector is None or not rp.store.supports_parts:
        return {}
    long = {h.memory.id: (parts, fact_reading(h.memory.kind, h.memory.content) is not None)
            for h in hits
            if len(parts := passages_of(h.memory.content, scope=owner.tenant_id)) > 1}
    found: dict[str, str] = {}
    # Only the passages' vectors are read: the hits already hold the text.
    for point_id, rows in rp.store.passage_vectors(owner, list(long)).items():
        passages, read = long.get(point_id, ([], False))
        if len(rows) != len(passages) + read:
            continue
        best = int(np.argmax(rows[: len(passages)] @ vector))
        text = passages[best].strip()
        found[point_id] = ("… " if best > 0 else "") + text + (
            " …" if best < len(passages) - 1 else "")
    return found


@dataclass(frozen=True)
class _Entry:
    hit: SearchHit
    line: str
    order: tuple[int, int, int]  # where it is written: group, its hit's rank, after its hit


def _line(hit: SearchHit, quoted: str, language: BlockLanguage, context: bool) -> str:
    memory = hit.memory
    if memory.kind is MemoryKind.EPISODE:
        role = memory.sources[0].role if memory.sources else None
        if role is None:
            raw = str(memory.metadata.get("role", ""))
            role = Role(raw) if raw in Role._value2member_map_ else None
        line = episode_line(quoted, memory.occurred_at, role, language)
    else:
        line = format_line(quoted, memory.occurred_at)
    return "  " + line if context else line


def arrange(
    hits: Sequence[SearchHit], chosen: Sequence[SearchHit], quotes: dict[str, str],
    language: BlockLanguage,
) -> list[_Entry]:
    """The block's entries in priority order (what the budget keeps first), each knowing
    where it is written (`order`): facts and notes first, then episodes, each by score; a
    hit's next turn right after it, as its context."""
    chosen_ids = {h.memory.id for h in chosen}
    facts = [h for h in chosen if h.memory.kind is not MemoryKind.EPISODE]
    drawn: dict[str, list[SearchHit]] = {}
    for fact in facts:
        for episode_id in fact.memory.episodes:
            drawn.setdefault(episode_id, []).append(fact)
    next_of: dict[str, list[SearchHit]] = {}
    for h in hits:
        if h.context_of is not None and h.context_of in chosen_ids and \
                h.memory.id not in chosen_ids:
            next_of.setdefault(h.context_of, []).append(h)
    entries: list[_Entry] = []
    seen: set[str] = set()
    for rank, h in enumerate(chosen):
        episode = h.memory.kind is MemoryKind.EPISODE
        if episode and h.memory.id in drawn and not adds_something(h, drawn[h.memory.id]):
            continue
        group = 1 if episode else 0
        text = quotes.get(h.memory.id, h.memory.content)
        entries.append(_Entry(h, _line(h, text, language, False), (group, rank, 0)))
        seen.add(h.memory.id)
        for n, nxt in enumerate(next_of.get(h.memory.id, [])):
            if nxt.memory.id in seen:
                continue
            seen.add(nxt.memory.id)
            text = quotes.get(nxt.memory.id, nxt.memory.content)
            entries.append(_Entry(nxt, _line(nxt, text, language, True), (group, rank, n + 1)))
    return entries


def build_context(
    rp: reads.ReadPath, owner: Owner, req: ContextRequest, counter: TokenCounter | None = None
) -> ContextResponse:
    counter = counter or default_counter()
    found = reads.find_memories(
        rp,
        owner,
        SearchRequest(
            user_id=req.user_id,
            query=search_query(req.query, req.recent_messages),
            top_k=req.top_k,
            scope=req.scope,
            project=req.project,
            types=req.types,
            tags=req.tags,
        ),
    )
    hits = not_yet_shown(found.response.results, req.recent_messages)
    chosen = admitted(hits, req.min_score, found.unweighted)
    language = block_language(req)
    shown = [*chosen, *(h for h in hits if h.context_of is not None)]
    quotes = matched_passages(rp, owner, shown, found.vector)
    entries = arrange(hits, chosen, quotes, language)
    # The budget keeps the entries in priority order; the block is then written in reading
    # order (facts first), which leaves its token count as it was up to how lines join.
    packed = pack(language, ((e, e.line) for e in entries), req.token_budget,
                  counter.scoped(owner.tenant_id),
                  order=lambda e: e.order)
    return ContextResponse(
        block=packed.block,
        language=language,
        tokens=packed.tokens,
        token_budget=req.token_budget,
        tokenizer=counter.name,
        items=[ContextItem(memory=e.hit.memory, score=e.hit.score,
                           label="context" if e.hit.context_of else e.hit.label,
                           context_of=e.hit.context_of,
                           quote=quotes.get(e.hit.memory.id)) for e in packed.kept],
        omitted=packed.omitted,
    )

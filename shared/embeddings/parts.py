"""Long memories as parts: one vector for each passage of a long text, and one for the whole.

An embedder pools a text into one vector, so what one passage of a long chat turn says is
blurred by the rest. A memory longer than `LONG_TOKENS` is therefore split at sentence
ends into parts of at most about `PART_TOKENS`, each embedded on its own; the store keeps
them as a multivector scored by MaxSim (`shared/store`, `PARTS`), so a query meets the
passage that answers it. The memory's single vector, which deduplication, conflicts and
the dense list read, is the normalised mean of its parts: the text is embedded once, in
parts, never again whole. A fact's topic reading (`memoryd.extraction.topics`) is one more
part of it, which only the MaxSim over parts reads.

Lengths are estimated, not tokenised (shared/embeddings/lengths.py): close enough to
size passages for any embedder, local or hosted.

What the model reads of one memory is bounded, whatever its shape: at most
`MEMORY_TOKENS` tokens as the model counts them (`Embedder.count_tokens`), its passages in
order until that budget is spent (the last one cut to fit). Every ordinary message of the
maximum size (8 KB of English, Chinese, digits, emoji) fits whole; a run such as
"a/a/a/…", a token a character, would otherwise cost five times an English one. The
text stays stored and keyword-searchable whole.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memoryd.embeddings.base import Embedder, FloatArray, l2_normalize
from memoryd.embeddings.lengths import (
    CHARACTER_SCRIPTS,
    LONG_WORD_CHARS,
    LONG_WORD_CHARS_PER_TOKEN,
    MAX_TOKENS_PER_CHAR,
    WORD_TOKENS,
    estimated_tokens,
    window,
    word_tokens,
)
from memoryd.platform.text_memo import TextMemo

__all__ = ["LONG_TOKENS", "MEMORY_TOKENS", "PART_TOKENS", "WORD_TOKENS", "MemoryVector",
           "embed_memories", "estimated_tokens", "part_spans", "passages_of", "split_parts"]

# A part is a few sentences: short enough that one topic dominates its vector, long
# enough that it still carries its context.
PART_TOKENS = 96
# Texts up to this length stay whole: splitting them would leave parts of a sentence or two.
LONG_TOKENS = 160
# The most tokens of one memory a model reads (six of e5's 512-token windows): 8 KB of
# English is about 1,700, of Chinese about 2,100, of "a/a/a/…" 8,200.
MEMORY_TOKENS = 3072
# Passages are cut after a sentence end (either script) or a line break.
_SENTENCE_END = re.compile(r"(?<=[.!?;。！？；…])\s+|(?<=[。！？；…])|\n+")
_CJK = re.compile(f"[{CHARACTER_SCRIPTS}]")
# A unit a long sentence is cut between: one such character, or a word of other scripts.
_UNIT = re.compile(f"[{CHARACTER_SCRIPTS}]|[^\\s{CHARACTER_SCRIPTS}]+")
# A word too long for one part is cut every this many characters.
_CHUNK_CHARS = int(PART_TOKENS * LONG_WORD_CHARS_PER_TOKEN)


# Where each long text's passages lie, kept by its digest for each scope (`TextMemo`:
# offsets only, no text). A user's long memories come back search after search, and cutting
# one costs about a millisecond on a 2-core host: the search's keyword head cuts each to
# score its passages (`memoryd.retrieval.keywords`), the block each shown one to quote the
# passage that matched (`memoryd.memories.context`). One memo serves both, so a memory
# that does both on a request is cut once.
_SPANS: TextMemo[tuple[tuple[int, int], ...]] = TextMemo(2048)


def passages_of(text: str, *, scope: str) -> list[str]:
    """`split_parts(text)`, its cuts kept for `scope` (the tenant reading it)."""
    return [text[begin:end] for begin, end in _SPANS.get(scope, text, part_spans)]


def split_parts(text: str) -> list[str]:
    """`text` alone when it is not long; else its passages, in order, covering it all.

    Sentences are packed into `ceil(length / PART_TOKENS)` passages of about equal size; a
    sentence longer than a part is cut at word (or character) boundaries. Each passage is
    a slice of the text, its line breaks and spacing kept inside and stripped at its ends
    (`part_spans` gives the slices). Linear in the length of the text."""
    return [text[begin:end] for begin, end in part_spans(text)]


def part_spans(text: str) -> tuple[tuple[int, int], ...]:
    """Where `split_parts` cuts `text`: each passage as its (begin, end) offsets in the
    text. Offsets hold no text, so a memo of them keeps nothing a forget must clear
    (`memoryd.platform.text_memo`)."""
    total = estimated_tokens(text)
    if total <= LONG_TOKENS:
        return ((0, len(text)),)
    target = total / math.ceil(total / PART_TOKENS)
    spans: list[tuple[int, int]] = []
    begin = end = 0
    size = 0.0
    for piece_begin, piece_end, weight in _pieces(text):
        if size and size + weight > target * 1.25:
            spans.append((begin, end))
            size = 0.0
        if not size:
            begin = piece_begin
        end = piece_end
        size += weight
        if size >= target:
            spans.append((begin, end))
            size = 0.0
    if size:
        spans.append((begin, end))
    stripped = [_stripped(text, b, e) for b, e in spans]
    return tuple(span for span in stripped if span[0] < span[1]) or ((0, len(text)),)


def _stripped(text: str, begin: int, end: int) -> tuple[int, int]:
    """[begin, end) without the whitespace at its ends, as `str.strip` removes it."""
    piece = text[begin:end]
    return begin + len(piece) - len(piece.lstrip()), end - len(piece) + len(piece.rstrip())


def _pieces(text: str) -> list[tuple[int, int, float]]:
    """Sentence spans and their estimates, with any longer than a part cut into part-sized
    runs of words."""
    out: list[tuple[int, int, float]] = []
    at = 0
    for boundary in [*(m.end() for m in _SENTENCE_END.finditer(text)), len(text)]:
        if boundary <= at:
            continue
        weight = estimated_tokens(text[at:boundary])
        if weight <= PART_TOKENS:
            out.append((at, boundary, weight))
        else:
            out.extend(_cut(text, at, boundary))
        at = boundary
    return out


def _cut(text: str, begin: int, end: int) -> list[tuple[int, int, float]]:
    """Spans of words (and single CJK characters) within [begin, end), each at most a
    part long, and their estimates; a word longer than a part is cut inside, every
    `_CHUNK_CHARS`."""
    runs: list[tuple[int, int, float]] = []
    start = begin
    size = 0.0
    last = begin
    for unit in _UNIT.finditer(text, begin, end):
        unit_begin, unit_end = unit.span()
        if unit_end - unit_begin <= LONG_WORD_CHARS:  # an ordinary word: one step, no slice
            weight = (1.0 if unit_end - unit_begin == 1 and _CJK.match(text, unit_begin)
                      else WORD_TOKENS)
            if size and size + weight > PART_TOKENS:
                runs.append((start, unit_begin, size))
                start, size = unit_begin, 0.0
            size += weight
            last = unit_end
            continue
        for at in range(unit_begin, unit_end, _CHUNK_CHARS):
            stop = min(at + _CHUNK_CHARS, unit_end)
            weight = word_tokens(text[at:stop])
            if size and size + weight > PART_TOKENS:
                runs.append((start, at, size))
                start, size = at, 0.0
            size += weight
            last = stop
    if start < end:
        runs.append((start, max(last, end), size))
    return runs


@dataclass(frozen=True)
class MemoryVector:
    """One memory's vectors: `dense` (dim,), and `parts` (n, dim) when it is long or is
    also read by another text (its passages, then that reading)."""

    dense: FloatArray
    parts: FloatArray | None = None

    def parts_list(self) -> list[list[float]] | None:
        return None if self.parts is None else self.parts.tolist()


def embed_memories(
    embedder: Embedder, texts: Sequence[str], in_parts: bool = True,
    readings: Sequence[str | None] | None = None,
) -> list[MemoryVector]:
    """Every text's vectors, in one call to the model for all their passages (with
    `in_parts` False, every text whole), each text within `MEMORY_TOKENS`.

    `readings`, one per text (None: none): another text the memory is also read by (a
    fact's topic reading, `memoryd.extraction.topics`), embedded as one more of its parts,
    so the dense list's MaxSim over parts meets it too. The memory's own vector stays that
    of its text: deduplication and conflicts compare what memories say. Without parts
    (`in_parts` False) there is nowhere to keep a reading, and none is embedded."""
    split = [within_budget(embedder, split_parts(t) if in_parts else [t]) for t in texts]
    extra = [within_budget(embedder, [r])[0] if in_parts and r else None
             for r in (readings if readings is not None else [None] * len(texts))]
    flat = [p for parts in split for p in parts] + [r for r in extra if r is not None]
    rows = embedder.embed_documents(flat)
    out: list[MemoryVector] = []
    at, next_reading = 0, sum(len(parts) for parts in split)
    for parts, reading in zip(split, extra, strict=True):
        block = rows[at : at + len(parts)]
        at += len(parts)
        whole = block[0] if len(parts) == 1 else l2_normalize(block.mean(axis=0))
        if reading is not None:
            block = np.vstack([block, rows[next_reading]])
            next_reading += 1
        out.append(MemoryVector(whole, block if len(block) > 1 else None))
    return out


def within_budget(embedder: Embedder, parts: list[str], budget: int = MEMORY_TOKENS) -> list[str]:
    """The leading passages of one memory whose tokens, as the model counts them, add up to
    at most `budget`; the first one over it is cut to the rest of the budget (kept when
    that is at least a quarter of a part, or when it is the only one). A memory too short to
    reach the budget is not counted at all."""
    if sum(len(p) for p in parts) * MAX_TOKENS_PER_CHAR + 2 * len(parts) <= budget:
        return parts
    kept: list[str] = []
    used = 0.0
    for part in parts:
        tokens = embedder.count_tokens(part)
        if used + tokens <= budget:
            kept.append(part)
            used += tokens
            continue
        room = int(budget - used)
        if room >= PART_TOKENS // 4 or not kept:
            cut = window(part, room, embedder.count_tokens, keep_end=False)
            if cut.strip():
                kept.append(cut)
        break
    return kept or [parts[0][:1]]

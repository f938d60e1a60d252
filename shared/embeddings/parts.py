"""Long memories as parts: one vector for each passage of a long text, and one for the whole.

An embedder pools a text into one vector, so what one passage of a long chat turn says is
blurred by the rest. A memory longer than `LONG_TOKENS` is therefore split at sentence
ends into parts of at most about `PART_TOKENS`, each embedded on its own; the store keeps
them as a multivector scored by MaxSim (`shared/store`, `PARTS`), so a query meets the
passage that answers it. The memory's single vector, which deduplication, conflicts and
the dense list read, is the normalised mean of its parts: the text is embedded once, in
parts, never again whole.

Lengths are estimated, not tokenised: a Chinese character counts one token and a word of
other scripts about 1.3, as multilingual subword vocabularies cut them; that is close
enough to size passages for any embedder, local or hosted.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from shared.embeddings.base import Embedder, FloatArray, l2_normalize

# A part is a few sentences: short enough that one topic dominates its vector, long
# enough that it still carries its context.
PART_TOKENS = 96
# Texts up to this length stay whole: splitting them would leave parts of a sentence or two.
LONG_TOKENS = 160
# Passages are cut after a sentence end (either script) or a line break.
_SENTENCE_END = re.compile(r"(?<=[.!?;。！？；…])\s+|(?<=[。！？；…])|\n+")
# Scripts a subword vocabulary cuts about a character a token: kana, CJK ideographs, hangul.
_CHARACTER_SCRIPTS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_CJK = re.compile(f"[{_CHARACTER_SCRIPTS}]")
_WORD = re.compile(f"[^\\s{_CHARACTER_SCRIPTS}]+")
# A unit a long sentence is cut between: one such character, or a word of other scripts.
_UNIT = re.compile(f"[{_CHARACTER_SCRIPTS}]|[^\\s{_CHARACTER_SCRIPTS}]+")
WORD_TOKENS = 1.3


def estimated_tokens(text: str) -> float:
    """About how many subword tokens a multilingual embedder cuts `text` into."""
    return len(_CJK.findall(text)) + WORD_TOKENS * len(_WORD.findall(text))


def split_parts(text: str) -> list[str]:
    """`text` alone when it is not long; else its passages, in order, covering it all.

    Sentences are packed into `ceil(length / PART_TOKENS)` passages of about equal size; a
    sentence longer than a part is cut at word (or character) boundaries. Each passage is
    a slice of the text, its line breaks and spacing kept. Linear in the length of the
    text."""
    total = estimated_tokens(text)
    if total <= LONG_TOKENS:
        return [text]
    target = total / math.ceil(total / PART_TOKENS)
    parts: list[str] = []
    begin = end = 0
    size = 0.0
    for piece_begin, piece_end in _pieces(text):
        weight = estimated_tokens(text[piece_begin:piece_end])
        if size and size + weight > target * 1.25:
            parts.append(text[begin:end])
            size = 0.0
        if not size:
            begin = piece_begin
        end = piece_end
        size += weight
        if size >= target:
            parts.append(text[begin:end])
            size = 0.0
    if size:
        parts.append(text[begin:end])
    return [p.strip() for p in parts if p.strip()] or [text]


def _pieces(text: str) -> list[tuple[int, int]]:
    """Sentence spans, with any longer than a part cut into part-sized runs of words."""
    out: list[tuple[int, int]] = []
    at = 0
    for boundary in [*(m.end() for m in _SENTENCE_END.finditer(text)), len(text)]:
        if boundary <= at:
            continue
        if estimated_tokens(text[at:boundary]) <= PART_TOKENS:
            out.append((at, boundary))
        else:
            out.extend(_cut(text, at, boundary))
        at = boundary
    return out


def _cut(text: str, begin: int, end: int) -> list[tuple[int, int]]:
    """Spans of words (and single CJK characters) within [begin, end), each at most a
    part long."""
    runs: list[tuple[int, int]] = []
    start = begin
    size = 0.0
    last = begin
    for unit in _UNIT.finditer(text, begin, end):
        weight = 1.0 if len(unit.group()) == 1 and _CJK.match(unit.group()) else WORD_TOKENS
        if size and size + weight > PART_TOKENS:
            runs.append((start, unit.start()))
            start, size = unit.start(), 0.0
        size += weight
        last = unit.end()
    if start < end:
        runs.append((start, max(last, end)))
    return runs


@dataclass(frozen=True)
class MemoryVector:
    """One memory's vectors: `dense` (dim,), and `parts` (n, dim) when it is long."""

    dense: FloatArray
    parts: FloatArray | None = None

    def parts_list(self) -> list[list[float]] | None:
        return None if self.parts is None else self.parts.tolist()


def embed_memories(
    embedder: Embedder, texts: Sequence[str], in_parts: bool = True
) -> list[MemoryVector]:
    """Every text's vectors, in one call to the model for all their passages (with
    `in_parts` False, every text whole)."""
    split = [split_parts(t) if in_parts else [t] for t in texts]
    flat = [p for parts in split for p in parts]
    rows = embedder.embed_documents(flat)
    out: list[MemoryVector] = []
    at = 0
    for parts in split:
        block = rows[at : at + len(parts)]
        at += len(parts)
        if len(parts) == 1:
            out.append(MemoryVector(block[0]))
        else:
            out.append(MemoryVector(l2_normalize(block.mean(axis=0)), block))
    return out


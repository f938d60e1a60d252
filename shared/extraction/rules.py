"""Rule-based memory extraction, used when no LLM is configured.

Input is the user's own messages of one interaction (Chinese, English, or both in one
message). Each message is cut into sentences, each sentence is matched against the tables
in `rules_patterns`, and a match becomes a short third-person memory ("I like spicy food" ->
"User likes spicy food", "我喜欢吃辣" -> "用户喜欢吃辣"). Rules are deliberately conservative:
a missed memory costs less than a wrong one, since wrong ones are later recalled as truth.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import islice
from typing import Literal

from memoryd.extraction import rules_patterns as p
from memoryd.extraction.first_chars import may_start

__all__ = ["RuleCandidate", "extract_rules", "extract_rules_sourced"]

MIN_CHARS = 4
MAX_CHARS = 400
# A memory-worthy statement is never a 1000-character run-on; skipping those also bounds the
# regex work on pasted documents.
MAX_SENTENCE_CHARS = 1000
# The sentences of one message read for facts: more than an 8 KB message of ordinary prose
# holds (ops/bench/hostile.py's ordinary messages filled to 8 KB: 196 in English, whose
# clauses are short, 134 in Chinese). Only a list of tiny lines ("我1", "i a2;", numbered
# items) reaches it; its later lines are not read for facts, and its episode keeps them
# all. So a message's rule work is bounded whatever its shape.
MAX_SENTENCES = 256

_MAY_BE_FILLER = may_start(p.FILLERS)  # most sentences start with no filler word: no scan
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_WS = re.compile(r"\s+")
_WORD = re.compile(r"[A-Za-z']+")
_PLEASE = re.compile(r"^(?:please|pls|plz|kindly)\s*,?\s+", re.IGNORECASE)
_LEADING_I = re.compile(r"^i\b(?![/.\-]\w)", re.IGNORECASE)
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\uff07": "'"})
_CONTRACTED = {"'m": "is", "'ve": "has", "'ll": "will", "'d": "would"}
# "We adopted a cat": the user's household; the verb stays plural, "our"/"us" become theirs
# (lower case only, so "the US" stays a country).
_WE = re.compile(r"^we(?:'ve|'re)?\b", re.IGNORECASE)
_WE_VERB = {"we've": " have", "we're": " are"}
_OUR = re.compile(r"\b(?:ours|our|us)\b")
_THEIR = {"our": "their", "ours": "theirs", "us": "them"}
_OBJECTS_STATEMENT = {"my": "their", "mine": "theirs", "me": "them", "myself": "themselves"}
_OBJECTS_IMPERATIVE = {
    "my": "the user's",
    "mine": "the user's",
    "me": "the user",
    "myself": "the user",
}


@dataclass(frozen=True)
class RuleCandidate:
    content: str
    type: Literal["semantic", "procedural"]
    category: Literal["preference", "fact", "plan", "instruction"]
    importance: int


def extract_rules(
    texts: Sequence[str], pace: Callable[[Callable[[], None]], None] | None = None
) -> list[RuleCandidate]:
    """Memory candidates from the user messages of one interaction, deduplicated, in order.

    `pace`, when given, runs the reading of each message (`TextPacer.run`).
    """
    return [candidate for candidate, _ in extract_rules_sourced(texts, pace)]


def extract_rules_sourced(
    texts: Sequence[str], pace: Callable[[Callable[[], None]], None] | None = None
) -> list[tuple[RuleCandidate, list[int]]]:
    """`extract_rules`, each candidate with the positions in `texts` of the messages that
    state it (a fact said in two messages names both: its provenance)."""
    found: list[RuleCandidate] = []
    origins: list[list[int]] = []
    seen: dict[str, int] = {}
    # A sentence said twice gives the same candidates twice: look at each once, so repeating
    # one sentence costs a message nothing (it only adds the message to their origins).
    read: dict[str, list[int]] = {}

    def read_text(position: int, text: str) -> None:
        for sentence in islice(_sentences(text), MAX_SENTENCES):
            if sentence in read:
                for index in read[sentence]:
                    if position not in origins[index]:
                        origins[index].append(position)
                continue
            gave: list[int] = []
            read[sentence] = gave
            for candidate in _from_sentence(sentence):
                key = candidate.content.casefold()
                if key not in seen:
                    seen[key] = len(found)
                    found.append(candidate)
                    origins.append([])
                index = seen[key]
                gave.append(index)
                if position not in origins[index]:
                    origins[index].append(position)

    for position, text in enumerate(texts):
        if not isinstance(text, str):
            continue  # defensive: callers pass message contents straight from JSON
        if pace is None:
            read_text(position, text)
        else:
            pace(partial(read_text, position, text))
    return list(zip(found, origins, strict=True))


# --- sentences and clauses ---------------------------------------------------------------


def _sentences(text: str) -> Iterator[str]:
    """The text's sentences, in order, read lazily (a reader that stops early pays for no
    more of the text)."""
    at = 0
    text = text.translate(_APOSTROPHES)
    for split in p.SENTENCE_SPLIT.finditer(text):
        piece, at = text[at:split.start()], split.end()
        sentence = " ".join(piece.split())  # whitespace runs as one space, ends stripped
        if sentence and len(sentence) <= MAX_SENTENCE_CHARS:
            yield sentence
    sentence = " ".join(text[at:].split())
    if sentence and len(sentence) <= MAX_SENTENCE_CHARS:
        yield sentence


def _strip_end(text: str) -> str:
    """`text` without its trailing run of `p.TRAILING` characters (str methods, no scan)."""
    while True:
        stripped = text.rstrip().rstrip(p.TRAILING_MARKS)
        if len(stripped) == len(text):
            return text
        text = stripped


def _strip_start(text: str) -> str:
    """`text` without its leading run of `p.LEADING` characters."""
    while True:
        stripped = text.lstrip().lstrip(p.LEADING_MARKS)
        if len(stripped) == len(text):
            return text
        text = stripped


def _cleaned(text: str) -> tuple[str, bool]:
    """`_clean(text)`, and whether it is stable (cleaning it again changes nothing)."""
    # Only the start changes after the first round: what is left is a suffix of a text that
    # already lost its trailing punctuation, so the trailing strip is done once.
    text = _strip_end(text)
    for _ in range(4):
        cleaned = _strip_start(text)
        filler = p.FILLERS.match(cleaned) if _MAY_BE_FILLER(cleaned) else None
        if filler is not None:
            cleaned = cleaned[filler.end() :]
        if len(cleaned) == len(text):
            return text, True
        text = cleaned
    return text, False


def _clean(text: str) -> str:
    """Drop surrounding punctuation and leading fillers ("ok, so", "嗯，对了") until stable
    (at most four rounds)."""
    return _cleaned(text)[0]


def _from_sentence(sentence: str) -> list[RuleCandidate]:
    ended = _strip_end(sentence)
    tail = sentence[len(ended) :]
    asked = "?" in tail or "？" in tail
    body, stable = _cleaned(ended)
    if not body:
        return []
    # Each clause is cleaned once, though both the request scan and the clause loop read it.
    cleaned: dict[str, str] = {}

    def clean(clause: str) -> str:
        found = cleaned.get(clause)
        if found is None:
            found = cleaned[clause] = _clean(clause)
        return found

    split = p.CLAUSE_SPLIT.search(body)
    if split is not None:
        stated = _before_request(body, split, clean)
        if stated is not None:
            # What follows asks for something: it is no fact, and its question mark is
            # its own ("I'm allergic to peanuts, any snack ideas?").
            body, asked = stated, False
            split = p.CLAUSE_SPLIT.search(body)
    request = p.REQUEST_PREFIX.match(body)
    single = split is None
    if request is None and stable and single and not p.ANY_MATCH.match(body):
        # Most sentences: one clause, no request wrapper, and no rule applies at its start.
        # Every check below would end in no candidate, so they are not run.
        return []
    parts = [body] if single else p.CLAUSE_SPLIT.split(body)
    if p.FORGET_SCAN.found(body):
        return []
    # "Could you always answer in English?" is a request despite its question mark.
    if request:
        wrapped = _match(_clean(body[request.end() :]), requests_only=True)
        if wrapped is not None:
            return [wrapped]
    if asked or _doubtful(body):
        return []
    whole = _match(body)
    if whole is not None:
        return [whole]
    # Nothing at the start: look at each clause ("thanks, my name is Ana").
    if stable and len(parts) == 1:
        return []  # the one clause is the body, already matched
    found = []
    read = {body}  # a clause equal to the body, or to an earlier clause, gives nothing new
    for part in parts:
        clause = clean(part)
        if clause in read:
            continue
        read.add(clause)
        # A clause no rule applies to gives nothing, doubtful or not: that is asked first.
        if clause and p.ANY_MATCH.match(clause) and not _doubtful(clause):
            candidate = _match(clause)
            if candidate is not None:
                found.append(candidate)
    return found


def _before_request(body: str, first: re.Match[str], clean: Callable[[str], str] = _clean
                    ) -> str | None:
    """`body` up to the first clause after its first that asks the assistant for
    something (`p.REQUEST_CLAUSE`) or asks a question (`p.QUESTION`: "周末去哪玩好"), or
    None when no later clause does. One pass over the clause boundaries; each clause is
    read once."""
    split: re.Match[str] | None = first
    while split is not None:
        following = p.CLAUSE_SPLIT.search(body, split.end())
        clause = clean(body[split.end(): len(body) if following is None else following.start()])
        if clause and (p.REQUEST_CLAUSE.match(clause) or p.QUESTION.search(clause)):
            stated = _strip_end(body[: split.start()])
            return stated or None
        split = following
    return None


def _doubtful(text: str) -> bool:
    return p.DOUBTFUL_SCAN.found(text)


# --- matching ----------------------------------------------------------------------------


def _match(body: str, *, requests_only: bool = False) -> RuleCandidate | None:
    if not body or not p.ANY_MATCH.match(body):
        return None
    for pattern in p.EXPLICIT:
        explicit = pattern.match(body)
        if explicit:
            return _explicit(explicit.group("c"))
    for rule in p.RULES:
        if requests_only and rule.category != "instruction":
            continue
        found = rule.pattern.match(body)
        if found:
            candidate = _build(rule, found, body)
            if candidate is not None:
                return candidate
    return None


def _instruction(text: str) -> str | None:
    """The instruction `text` states, rewritten, or None when it is not one."""
    for rule in p.RULES:
        if rule.category == "instruction":
            found = rule.pattern.match(text)
            if found:
                return _imperative(found.groupdict().get("c") or text)
    return None


def _explicit(clause: str) -> RuleCandidate | None:
    clause = _clean(clause)
    if not clause or p.WH_CLAUSE.search(clause) or _doubtful(clause) or p.FORGET_SCAN.found(clause):
        return None
    to = p.REMEMBER_TO.match(clause)
    if to:
        inner = _clean(to.group("c"))
        # "remember to always X" is the rule "always X"; "remember to X" stays a reminder.
        content = _instruction(inner) or _imperative(f"remember to {inner}")
        return _candidate(content, "instruction", p.EXPLICIT_IMPORTANCE)
    instruction = _instruction(clause)
    if instruction is not None:
        return _candidate(instruction, "instruction", p.EXPLICIT_IMPORTANCE)
    return _candidate(_statement(clause), "fact", p.EXPLICIT_IMPORTANCE)


def _build(rule: p.Rule, found: re.Match[str], body: str) -> RuleCandidate | None:
    groups = found.groupdict()
    if rule.kind == "imperative":
        content = _imperative(groups.get("c") or body)
    elif rule.kind == "time_led":
        when, rest = groups["t"], groups["c"]
        if _CJK.match(when):
            content = "用户" + when + _third_person(rest, imperative=False)
        else:
            content = f"{_statement(rest)} {when.lower()}"
    else:
        content = _statement(body)
    return _candidate(content, rule.category, p.IMPORTANCE[rule.category])


def _candidate(content: str, category: p.Category, importance: int) -> RuleCandidate | None:
    content = _WS.sub(" ", _strip_start(_strip_end(content))).strip()
    if not MIN_CHARS <= len(content) <= MAX_CHARS:
        return None
    if not _CJK.search(content) and len(content.split()) < 2:
        return None  # "Them", "Pizza": too little to be a memory on its own
    if content[0].isascii() and content[0].islower():
        content = content[0].upper() + content[1:]
    kind: Literal["semantic", "procedural"] = (
        "procedural" if category == "instruction" else "semantic"
    )
    return RuleCandidate(content, kind, category, importance)


# --- rewriting into a third-person memory --------------------------------------------------


def _statement(text: str) -> str:
    """First person -> "User"/"用户" at the start; later I/my/me/我 -> the user/their/them/用户."""
    if text.startswith("我们家"):
        return "用户家" + _third_person(text[3:], imperative=False)
    if text.startswith("我们"):
        return "用户和家人" + _third_person(text[2:], imperative=False)
    if text.startswith("我"):
        return "用户" + _third_person(text[1:], imperative=False)
    we = _WE.match(text)
    if we:
        rest = _OUR.sub(lambda m: _THEIR[m.group()], text[we.end():])
        return "User and family" + _WE_VERB.get(we.group().lower(), "") + rest
    for pattern, head in p.EN_START:
        start = pattern.match(text)
        if start:
            return start.expand(head) + _third_person(text[start.end() :], imperative=False)
    start = _LEADING_I.match(text)
    if start:
        verb, used = _conjugate(text[start.end() :])
        return "User" + verb + _third_person(text[start.end() + used :], imperative=False)
    return _third_person(text, imperative=False)


def _imperative(text: str) -> str:
    """An instruction kept as an instruction, about "the user" instead of "me"/"我"."""
    return _third_person(_PLEASE.sub("", text.strip()), imperative=True)


def _third_person(text: str, *, imperative: bool) -> str:
    out: list[str] = []
    pos = 0
    for found in p.EN_I.finditer(text):
        if found.start() < pos:
            continue  # inside a verb already conjugated
        out.append(text[pos : found.start()])
        contracted = found.group()[1:].lower()
        if contracted:
            out.append("the user " + _CONTRACTED[contracted])
            pos = found.end()
        else:
            verb, used = _conjugate(text[found.end() :])
            out.append("the user" + verb)
            pos = found.end() + used
    out.append(text[pos:])
    objects = _OBJECTS_IMPERATIVE if imperative else _OBJECTS_STATEMENT
    english = p.EN_OBJECT_WORDS.sub(lambda m: objects[m.group().lower()], "".join(out))
    return p.ZH_ME.sub("用户", english)


def _conjugate(rest: str) -> tuple[str, int]:
    """Third-person form of the first verb in `rest` (adverbs skipped): text and length used."""
    gap_start = 0
    for word in _WORD.finditer(rest):
        if rest[gap_start : word.start()].strip():
            return "", 0  # punctuation before any verb: nothing to conjugate
        if word.group().lower() in p.ADVERBS:
            gap_start = word.end()
            continue
        return rest[: word.start()] + _third(word.group()), word.end()
    return "", 0


def _third(verb: str) -> str:
    lower = verb.lower()
    if lower in p.IRREGULAR_VERBS:
        return p.IRREGULAR_VERBS[lower]
    if (
        lower in p.UNCHANGED_VERBS
        or "'" in lower
        or (lower.endswith("ed") and not lower.endswith("eed"))
        or not lower.isalpha()
    ):
        return verb
    if lower.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(lower) > 1 and lower.endswith("y") and lower[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"

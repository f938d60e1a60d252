"""LoCoMo and MADial-Bench: loading, and the retrieval protocol of `../shared/bench/README.md`.

Pure functions only (no I/O beyond reading the files), so every protocol rule is testable
on its own. The protocol is followed to the letter so numbers compare with other systems.
"""

from __future__ import annotations

import itertools
import json
import lzma
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

# Categories 1-4 are scored; 5 (adversarial) has no answer and is left out by the protocol.
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}

_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DATE = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([a-z]+),?\s+(\d{4})\s*$", re.IGNORECASE
)
# Parsed by hand rather than with strptime's %B, which follows the process locale.
_MONTHS = {
    name: i + 1
    for i, name in enumerate(
        ["january", "february", "march", "april", "may", "june", "july", "august",
         "september", "october", "november", "december"]
    )
}
_DIA_ID = re.compile(r"^D:?(\d+):(\d+)$")
_EVIDENCE_SPLIT = re.compile(r"[;\s]+")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    content: str
    created_at: datetime


@dataclass(frozen=True)
class Session:
    number: int
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    sessions: tuple[Session, ...]
    speaker_a: str = ""  # the first speaker's name: the user under the chat protocol

    def dia_ids(self) -> set[str]:
        return {t.dia_id for s in self.sessions for t in s.turns}

    def turn_count(self) -> int:
        return sum(len(s.turns) for s in self.sessions)


@dataclass(frozen=True)
class Question:
    """One scored query: its user, the text searched, the ids that count as found."""

    qid: str
    user_id: str
    query: str
    category: str
    relevant: tuple[str, ...]
    sessions: tuple[str, ...] = ()  # LongMemEval: the sessions that hold the answer
    as_of: datetime | None = None  # when the question is asked (LongMemEval: its date)


@dataclass(frozen=True)
class QuestionSet:
    questions: list[Question]
    skipped_no_evidence: int  # questions with no id that resolves
    unresolved_ids: list[str]  # evidence ids that resolve to no turn (annotation errors)
    ignored_category: int  # category 5 and anything else outside 1-4


def parse_session_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' → 2023-05-08T13:56:00Z (the data gives no zone: UTC)."""
    match = _DATE.match(text)
    if match is None:
        raise ValueError(f"not a LoCoMo session date: {text!r}")
    hour, minute, ampm, day, month_name, year = match.groups()
    month = _MONTHS.get(month_name.lower())
    if month is None:
        raise ValueError(f"unknown month in {text!r}")
    hour_24 = int(hour) % 12 + (12 if ampm.lower() == "pm" else 0)
    return datetime(int(year), month, int(day), hour_24, int(minute), tzinfo=UTC)


def turn_content(turn: dict[str, Any]) -> str:
    content = f"{turn['speaker']}: {turn['text']}"
    caption = turn.get("blip_caption")
    if caption:
        content += f" [image: {caption}]"
    return content


def normalize_dia_id(token: str) -> str:
    """'D:11:26' → 'D11:26', 'D30:05' → 'D30:5'; anything else is returned unchanged."""
    match = _DIA_ID.match(token)
    if match is None:
        return token
    return f"D{int(match.group(1))}:{int(match.group(2))}"


def parse_evidence(evidence: Sequence[str]) -> list[str]:
    """Each entry may hold several ids separated by ';' or spaces; order kept, repeats dropped."""
    ids: list[str] = []
    for entry in evidence:
        for token in _EVIDENCE_SPLIT.split(str(entry)):
            if token:
                ids.append(normalize_dia_id(token))
    return list(dict.fromkeys(ids))


def _session_numbers(conversation: dict[str, Any]) -> list[int]:
    # The session_N keys, not the date keys: conv-26 has more dates than sessions.
    found = (_SESSION_KEY.match(key) for key in conversation)
    return sorted(int(m.group(1)) for m in found if m is not None)


def parse_conversation(sample: dict[str, Any]) -> Conversation:
    raw = sample["conversation"]
    sessions = []
    for number in _session_numbers(raw):
        start = parse_session_date(raw[f"session_{number}_date_time"])
        # One second per turn keeps the turns of a session in order on the time axis.
        turns = tuple(
            Turn(str(t["dia_id"]), turn_content(t), start + timedelta(seconds=i))
            for i, t in enumerate(raw[f"session_{number}"])
        )
        sessions.append(Session(number, turns))
    return Conversation(str(sample["sample_id"]), tuple(sessions),
                        str(raw.get("speaker_a", "")))


def locomo_questions(samples: Sequence[dict[str, Any]], known: dict[str, set[str]],
                     asked: Mapping[str, datetime] | None = None) -> QuestionSet:
    """Categories 1-4, evidence resolved against `known[sample_id]` (the turns' dia_ids).
    `asked[sample_id]`: when the conversation's questions are asked (`Question.as_of`)."""
    questions: list[Question] = []
    skipped = ignored = 0
    unresolved: list[str] = []
    for sample in samples:
        sample_id = str(sample["sample_id"])
        for index, qa in enumerate(sample["qa"]):
            category = int(qa["category"])
            if category not in LOCOMO_CATEGORIES:
                ignored += 1
                continue
            ids = parse_evidence(qa.get("evidence") or [])
            resolved = tuple(i for i in ids if i in known[sample_id])
            unresolved += [f"{sample_id}/{i}" for i in ids if i not in known[sample_id]]
            if not resolved:
                skipped += 1
                continue
            questions.append(Question(
                qid=f"{sample_id}/q{index}", user_id=sample_id, query=str(qa["question"]),
                category=LOCOMO_CATEGORIES[category], relevant=resolved,
                as_of=(asked or {}).get(sample_id),
            ))
    return QuestionSet(questions, skipped, unresolved, ignored)


def load_locomo(
    path: Path, limit_conversations: int | None = None
) -> tuple[list[Conversation], QuestionSet]:
    samples: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    if limit_conversations is not None:
        samples = samples[:limit_conversations]
    conversations = [parse_conversation(s) for s in samples]
    known = {c.sample_id: c.dia_ids() for c in conversations}
    asked = {c.sample_id: at for c in conversations if (at := asked_at(c)) is not None}
    return conversations, locomo_questions(samples, known, asked)


def asked_at(conversation: Conversation) -> datetime | None:
    """When LoCoMo's questions about a conversation are asked: right after its last turn.
    Every question of a conversation then reads its time cues ("recently", "last year")
    and recency against the conversation's own calendar, and a run gives the same answers
    whenever it runs; asked at the run's own time, a cue's window moved with the clock and
    a few hybrid rankings with it (docs/decisions/0033-locomo-asked-at-its-end.md)."""
    last = max((t.created_at for s in conversation.sessions for t in s.turns), default=None)
    return None if last is None else last + timedelta(seconds=1)


LONG_TURN_SHAPE = (1.0, 0.5, 1.0, 2.5)


def long_turns(
    conversations: Sequence[Conversation], qset: QuestionSet, min_chars: int
) -> tuple[list[Conversation], QuestionSet]:
    """LoCoMo as long chat turns: each session's consecutive turns joined, one per line,
    until a memory holds more than its length (a session's last may hold less). Lengths
    cycle through `LONG_TURN_SHAPE` times `min_chars`, so that, as in real transcripts,
    most turns run near the length and some far past it (past e5's 512-token window for
    `min_chars` 1000). A question's evidence becomes the long turns that hold its turns.
    LoCoMo's own turns are short."""
    if min_chars < 1:
        raise ValueError("min_chars must be at least 1")
    merged: list[Conversation] = []
    key_of: dict[tuple[str, str], str] = {}
    shape = itertools.cycle(LONG_TURN_SHAPE)
    length = min_chars * next(shape)
    for conv in conversations:
        sessions = []
        for session in conv.sessions:
            joined: list[Turn] = []
            group: list[Turn] = []
            for i, turn in enumerate(session.turns):
                group.append(turn)
                if (sum(len(t.content) + 1 for t in group) > length
                        or i == len(session.turns) - 1):
                    key = group[0].dia_id if len(group) == 1 else \
                        f"{group[0].dia_id}-{group[-1].dia_id}"
                    for t in group:
                        key_of[(conv.sample_id, t.dia_id)] = key
                    joined.append(Turn(key, "\n".join(t.content for t in group),
                                       group[0].created_at))
                    group = []
                    length = min_chars * next(shape)
            sessions.append(Session(session.number, tuple(joined)))
        merged.append(Conversation(conv.sample_id, tuple(sessions), conv.speaker_a))
    questions = [
        Question(q.qid, q.user_id, q.query, q.category,
                 tuple(dict.fromkeys(key_of[(q.user_id, r)] for r in q.relevant)),
                 as_of=q.as_of)
        for q in qset.questions
    ]
    return merged, QuestionSet(questions, qset.skipped_no_evidence, qset.unresolved_ids,
                               qset.ignored_category)


# ---- MADial-Bench ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MadialMemory:
    memory_id: str
    user_id: str
    event: str
    occurred_at: datetime


def _json_lines(path: Path) -> Iterator[dict[str, Any]]:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            yield json.loads(line)


def parse_madial_time(text: str) -> datetime:
    """'2023-12-25' → midnight UTC; a full ISO time is accepted too."""
    value = datetime.fromisoformat(text.strip())
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def load_madial_memories(path: Path) -> list[MadialMemory]:
    """One `{"<id>": {time, event, user-id, id, ...}}` per line; ids and users as strings."""
    memories = []
    for line in _json_lines(path):
        for key, item in line.items():
            memories.append(MadialMemory(
                memory_id=str(item.get("id", key)), user_id=str(item["user-id"]),
                event=str(item["event"]), occurred_at=parse_madial_time(str(item["time"])),
            ))
    return memories


def mixed_madial_memories(
    memories: Sequence[MadialMemory], odd: Sequence[MadialMemory],
) -> list[MadialMemory]:
    """A mixed archive: `memories` with each odd (numeric) id's memory taken from `odd`,
    the same set in another language. An id `odd` lacks is refused: the two must be one
    set."""
    other = {(m.user_id, m.memory_id): m for m in odd}
    mixed = []
    for m in memories:
        if m.memory_id.isdigit() and int(m.memory_id) % 2:
            replacement = other.get((m.user_id, m.memory_id))
            if replacement is None:
                raise ValueError(f"memory {m.memory_id} of user {m.user_id} is not in the "
                                 "odd-id archive")
            m = replacement
        mixed.append(m)
    return mixed


def madial_query(dialogue: Sequence[str], test_turns: Sequence[int], context: int = 3) -> str:
    """The `context` lines just before the first test turn, `<BOD>` left out, one per line."""
    first = min(int(t) for t in test_turns)
    before = [line.strip() for line in dialogue[max(first - context, 0):first]]
    return "\n".join(line for line in before if line and line != "<BOD>")


def load_madial_questions(path: Path, known: dict[str, set[str]]) -> QuestionSet:
    """Dialogues → questions; relevant ids not among the user's own memories do not count."""
    questions: list[Question] = []
    skipped = 0
    unresolved: list[str] = []
    for line in _json_lines(path):
        user_id = str(line["user-id"])
        ids = list(dict.fromkeys(str(r) for r in line["relevant-id"]))
        own = known.get(user_id, set())
        resolved = tuple(i for i in ids if i in own)
        unresolved += [f"{user_id}/{i}" for i in ids if i not in own]
        query = madial_query(line["dialogue"], line["test-turn"])
        if not resolved or not query:
            skipped += 1
            continue
        questions.append(Question(
            qid=f"dialogue-{line['id']}", user_id=user_id, query=query, category="all",
            relevant=resolved,
        ))
    return QuestionSet(questions, skipped, unresolved, 0)


def chunks(items: Sequence[T], size: int) -> list[Sequence[T]]:
    """Consecutive slices of at most `size` (the gateway caps messages per interaction)."""
    if size < 1:
        raise ValueError("chunk size must be at least 1")
    return [items[i:i + size] for i in range(0, len(items), size)]


# ---- what is ingested: one interaction per session (or chunk of one) --------------------------


@dataclass(frozen=True)
class Item:
    key: str  # the dataset's id for this memory: a LoCoMo dia_id, a MADial memory id
    content: str
    created_at: datetime
    role: str = "user"


@dataclass(frozen=True)
class Interaction:
    idempotency_key: str
    items: Sequence[Item]
    thread_id: str | None = None  # a LoCoMo session is one conversation thread


@dataclass
class Corpus:
    key_field: str
    users: dict[str, list[Interaction]] = field(default_factory=dict)
    store_roles: tuple[str, ...] = ("user",)
    left_out: int = 0  # items of the data that say nothing once normalised (not posted)


def locomo_corpus(conversations: Sequence[Conversation], max_messages: int) -> Corpus:
    corpus = Corpus("dia_id")
    for conv in conversations:
        corpus.users[conv.sample_id] = [
            Interaction(
                f"eval-locomo-{conv.sample_id}-s{session.number}-c{i}",
                [Item(t.dia_id, t.content, t.created_at) for t in part],
                thread_id=f"session-{session.number}",
            )
            for session in conv.sessions
            for i, part in enumerate(chunks(session.turns, max_messages))
        ]
    return corpus


def madial_corpus(memories: Sequence[MadialMemory], max_messages: int) -> Corpus:
    corpus = Corpus("memory_id")
    by_user: dict[str, list[Item]] = {}
    for m in memories:
        by_user.setdefault(m.user_id, []).append(Item(m.memory_id, m.event, m.occurred_at))
    for user, items in by_user.items():
        corpus.users[user] = [
            Interaction(f"eval-madial-{user}-c{i}", part)
            for i, part in enumerate(chunks(items, max_messages))
        ]
    return corpus


# ---- LongMemEval -----------------------------------------------------------------------------

# The six question types, in the order reports list them.
LONGMEMEVAL_TYPES = ("single-session-user", "single-session-assistant",
                     "single-session-preference", "multi-session", "knowledge-update",
                     "temporal-reasoning")
_LME_DATE = re.compile(
    r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([A-Za-z]+\))?\s*(\d{1,2}):(\d{2})\s*$")
# What the gateway drops before it stores a text (memoryd.records.schemas.normalize_text),
# and whitespace: a turn of only these says nothing and is left out.
_INVISIBLE = re.compile("[\x00-\x20\x7f\u00a0\u200b-\u200d\u2060\ufeff]")


def parse_longmemeval_date(text: str) -> datetime:
    """'2023/05/30 (Tue) 23:40' → 2023-05-30T23:40:00Z (the data gives no zone: UTC)."""
    match = _LME_DATE.match(text)
    if match is None:
        raise ValueError(f"not a LongMemEval date: {text!r}")
    year, month, day, hour, minute = (int(g) for g in match.groups())
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def says_something(text: str) -> bool:
    return bool(_INVISIBLE.sub("", text))


@dataclass(frozen=True)
class ChatTurn:
    """One message of a real chat: its evidence key, who said it, what, and when."""

    key: str
    role: str  # "user" or "assistant"
    content: str
    created_at: datetime


@dataclass(frozen=True)
class ChatSession:
    thread_id: str
    turns: tuple[ChatTurn, ...]


@dataclass(frozen=True)
class Dialogue:
    """One user's history, session by session, as a chat server would have posted it."""

    user_id: str
    sessions: tuple[ChatSession, ...]

    def turn_count(self) -> int:
        return sum(len(s.turns) for s in self.sessions)


def session_of(key: str) -> str:
    """A LongMemEval turn key '<session_id>:<index>' → its session id."""
    return key.rsplit(":", 1)[0]


@dataclass(frozen=True)
class LongMemEval:
    dialogues: list[Dialogue]
    questions: QuestionSet
    empty_turns: int  # turns that say nothing once normalised (left out, not failed)


def parse_longmemeval(items: Sequence[dict[str, Any]]) -> LongMemEval:
    """Each question is its own user, who holds that question's haystack. A turn's key is
    '<session_id>:<index in its session>'; relevant are the `has_answer` turns, and the
    question's sessions are `answer_session_ids`. A question is asked at its own date."""
    dialogues: list[Dialogue] = []
    questions: list[Question] = []
    empty = skipped = 0
    for item in items:
        user = str(item["question_id"])
        sessions = []
        relevant: list[str] = []
        ids, dates = item["haystack_session_ids"], item["haystack_dates"]
        if not len(ids) == len(dates) == len(item["haystack_sessions"]):
            raise ValueError(f"{user}: haystack ids, dates and sessions differ in number")
        for session_id, date, raw in zip(ids, dates, item["haystack_sessions"], strict=True):
            start = parse_longmemeval_date(str(date))
            turns = []
            for i, turn in enumerate(raw):
                key = f"{session_id}:{i}"
                content = str(turn["content"])
                if not says_something(content):
                    empty += 1
                    continue
                if turn.get("has_answer"):
                    relevant.append(key)
                # One second per turn keeps the turns of a session in order on the time axis.
                turns.append(ChatTurn(key, str(turn["role"]), content,
                                      start + timedelta(seconds=i)))
            sessions.append(ChatSession(str(session_id), tuple(turns)))
        dialogues.append(Dialogue(user, tuple(sessions)))
        if not relevant:
            skipped += 1
            continue
        questions.append(Question(
            qid=user, user_id=user, query=str(item["question"]),
            category=str(item["question_type"]), relevant=tuple(relevant),
            sessions=tuple(str(s) for s in item["answer_session_ids"]),
            as_of=parse_longmemeval_date(str(item["question_date"])),
        ))
    return LongMemEval(dialogues, QuestionSet(questions, skipped, [], 0), empty)


def load_longmemeval(path: Path) -> LongMemEval:
    """The JSON list, or the same xz-compressed (`.xz`), as the benchmark ships it."""
    raw = lzma.decompress(path.read_bytes()) if path.suffix == ".xz" else path.read_bytes()
    items: list[dict[str, Any]] = json.loads(raw.decode("utf-8"))
    return parse_longmemeval(items)


# Turns per interaction in the ranking protocol: a session of long turns in one job could
# outlast the worker's time limit on a loaded host; how a session is cut ranks nothing.
DIALOGUE_CHUNK = 8


def dialogue_corpus(dialogues: Sequence[Dialogue], max_messages: int, prefix: str) -> Corpus:
    """The ranking protocol: every turn stored raw, user and assistant, one interaction per
    chunk of a session, each message under its own role."""
    max_messages = min(max_messages, DIALOGUE_CHUNK)
    corpus = Corpus("turn", store_roles=("user", "assistant"))
    for d in dialogues:
        corpus.users[d.user_id] = [
            Interaction(
                f"eval-{prefix}-{d.user_id}-{s.thread_id}{repeat}-c{i}",
                [Item(t.key, t.content, t.created_at, t.role) for t in part],
                thread_id=s.thread_id,
            )
            for s, repeat in zip(d.sessions, repeats(d.sessions), strict=True)
            for i, part in enumerate(chunks(s.turns, max_messages))
            if part
        ]
    return corpus


def repeats(sessions: Sequence[ChatSession]) -> list[str]:
    """Per session, "" the first time its id occurs in a dialogue and "-r<n>" the n-th time
    after: a haystack may hold one session twice (LongMemEval's dev half does, on two
    dates), and each post is a request of its own, so each needs a key of its own. The
    turns keep their keys: an identical turn posted again is one memory."""
    seen: dict[str, int] = {}
    out = []
    for session in sessions:
        n = seen.get(session.thread_id, 0)
        seen[session.thread_id] = n + 1
        out.append(f"-r{n}" if n else "")
    return out


def locomo_dialogues(conversations: Sequence[Conversation]) -> list[Dialogue]:
    """LoCoMo for the chat protocol: speaker A is the user, B the assistant. A turn's
    speaker is its "<speaker>: " prefix (`turn_content`); a long turn (`long_turns`) takes
    the role of its first line."""
    def role(conv: Conversation, turn: Turn) -> str:
        if not conv.speaker_a:
            raise ValueError(f"{conv.sample_id}: the conversation names no speaker_a")
        return "user" if turn.content.split(":", 1)[0] == conv.speaker_a else "assistant"

    return [
        Dialogue(conv.sample_id, tuple(
            ChatSession(f"session-{s.number}",
                        tuple(ChatTurn(t.dia_id, role(conv, t), t.content, t.created_at)
                              for t in s.turns))
            for s in conv.sessions))
        for conv in conversations
    ]

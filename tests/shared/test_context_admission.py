"""What enters the context block, decided against the user's own candidates, and how the
block is arranged: facts first, episodes by role, next turns as context, no fact twice."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from memoryd.memories.context import adds_something, admitted, arrange
from memoryd.records.models import MemoryKind, MemorySource, MemoryType, Role, Scope, Source
from memoryd.records.schemas import BlockLanguage, MemoryView, SearchHit
from memoryd.retrieval.context_block import HEADERS, episode_line, format_line, pack
from memoryd.retrieval.context_tokens import estimate_tokens

WHEN = datetime(2026, 5, 1, 12, tzinfo=UTC)


def hit(
    content: str, score: float, *, id: str | None = None, kind: MemoryKind = MemoryKind.FACT,
    role: Role | None = None, episodes: list[str] | None = None, context_of: str | None = None,
) -> SearchHit:
    sources = [MemorySource(role=role, at=WHEN)] if role is not None else []
    memory: dict[str, Any] = {
        "id": id or content, "content": content, "type": MemoryType.SEMANTIC,
        "scope": Scope.GLOBAL, "tags": [], "importance": 5, "source": Source.INTERACTION,
        "enabled": True, "occurred_at": WHEN, "created_at": WHEN, "updated_at": WHEN,
        "metadata": {}, "kind": kind, "sources": sources, "episodes": episodes or [],
    }
    return SearchHit(memory=MemoryView.model_validate(memory), score=score,
                     label="reference", context_of=context_of)


def background(n: int, score: float = 0.02) -> list[SearchHit]:
    return [hit(f"unrelated {i}", score) for i in range(n)]


def test_a_best_hit_near_relevant_opens_the_block_with_its_close_company() -> None:
    hits = [hit("best", 0.46), hit("close", 0.2), hit("far", 0.05), *background(20, 0.01)]
    assert [h.memory.content for h in admitted(hits)] == ["best", "close"]


def test_a_weak_best_hit_among_many_gives_no_block() -> None:
    # A user with nothing relevant: the best of many candidates stays below the gate.
    hits = [hit("a", 0.3), hit("b", 0.29), *background(20, 0.2)]
    assert admitted(hits) == []


def test_how_far_the_others_fall_from_the_best_decides_not_a_cut() -> None:
    # Every one of these is under 0.5, and close to a best that opened the block.
    hits = [hit("best", 0.45), hit("second", 0.3), hit("third", 0.12), *background(10, 0.01)]
    assert [h.memory.content for h in admitted(hits)] == ["best", "second", "third"]
    strong = [hit("best", 0.97), hit("near", 0.85), hit("fallen", 0.5), *background(10, 0.01)]
    assert [h.memory.content for h in admitted(strong)] == ["best", "near"]


def test_a_few_memories_are_shown_whatever_they_score() -> None:
    # README's example: the right memory ranks first at 0.10, with two others.
    few = [hit("User's daughter is called Mia", 0.10), hit("episode", 0.06),
           hit("用户喜欢吃火锅", 0.001)]
    assert [h.memory.content for h in admitted(few)] == ["User's daughter is called Mia",
                                                          "episode"]
    assert [h.memory.content for h in admitted([hit("only", 0.01)])] == ["only"]


def test_the_gate_reads_what_a_weighed_reply_earned_before_its_speaker_weighed_it() -> None:
    """Asked about oneself, an assistant's reply on the topic is weighed below the user's
    words; that the user holds something on the question still opens the block, and what
    enters is then decided on the weighed scores."""
    hits = [hit("I named my cat Luna", 0.36, role=Role.USER),
            hit("Luna is a lovely name for a cat…", 0.33, role=Role.ASSISTANT),
            hit("User's cat is called Luna", 0.3), *background(20, 0.02)]
    assert admitted(hits) == []  # on the weighed scores alone, below the gate
    opened = admitted(hits, unweighted={"Luna is a lovely name for a cat…": 0.52})
    assert [h.memory.content for h in opened] == [
        "I named my cat Luna", "Luna is a lovely name for a cat…", "User's cat is called Luna"]
    # The reply brought along as the next turn of the user's words counts as well.
    reply = hit("Luna is a lovely name for a cat…", 0.33, role=Role.ASSISTANT,
                context_of="I named my cat Luna")
    along = [hits[0], reply, *hits[2:]]
    assert [h.memory.content for h in admitted(
        along, unweighted={"Luna is a lovely name for a cat…": 0.52})] == [
        "I named my cat Luna", "User's cat is called Luna"]
    # Nothing on the question, whoever said it: still no block.
    assert admitted(hits, unweighted={"Luna is a lovely name for a cat…": 0.4}) == []


def test_min_score_is_the_rule_when_given() -> None:
    hits = [hit("best", 0.9), hit("near", 0.6), *background(10, 0.001)]
    assert [h.memory.content for h in admitted(hits, min_score=0.7)] == ["best"]
    assert len(admitted(hits, min_score=0)) == 12
    assert admitted([hit("a", 0.3), *background(10, 0.2)], min_score=0.5) == []


def test_next_turns_are_never_admitted_on_their_own() -> None:
    hits = [hit("best", 0.9, id="b"), hit("its reply", 0.9, context_of="b"),
            *background(10, 0.001)]
    assert [h.memory.content for h in admitted(hits)] == ["best"]


def test_an_episode_that_only_repeats_its_fact_adds_nothing() -> None:
    episode = hit("I just moved to Berlin last month", 0.8, id="e", kind=MemoryKind.EPISODE,
                  role=Role.USER)
    fact = hit("User just moved to Berlin last month", 0.8, episodes=["e"])
    assert not adds_something(episode, [fact])
    longer = hit("I just moved to Berlin last month, my sister Anna lives in Hamburg and "
                 "visits every weekend with her kids", 0.8, id="e2",
                 kind=MemoryKind.EPISODE, role=Role.USER)
    assert adds_something(longer, [fact])


def test_facts_come_first_and_a_covered_episode_is_left_out() -> None:
    episode = hit("I just moved to Berlin last month", 0.95, id="e", kind=MemoryKind.EPISODE,
                  role=Role.USER)
    reply = hit("Welcome to Berlin! Try the Markthalle Neun.", 0.01, id="r",
                kind=MemoryKind.EPISODE, role=Role.ASSISTANT, context_of="other")
    fact = hit("User just moved to Berlin last month", 0.9, id="f", episodes=["e"])
    other = hit("I adopted a cat named Luna", 0.85, id="other", kind=MemoryKind.EPISODE,
                role=Role.USER)
    hits = [episode, fact, other, reply, *background(10, 0.001)]
    chosen = admitted(hits)
    entries = arrange(hits, chosen, {}, BlockLanguage.EN)
    written = pack(BlockLanguage.EN, ((e, e.line) for e in entries), 2000, estimate_tokens,
                   order=lambda e: e.order)
    lines = written.block.splitlines()
    assert lines[0] == HEADERS[BlockLanguage.EN]
    assert lines[1:] == [
        format_line("User just moved to Berlin last month", WHEN),
        episode_line("I adopted a cat named Luna", WHEN, Role.USER, BlockLanguage.EN),
        "  " + episode_line("Welcome to Berlin! Try the Markthalle Neun.", WHEN,
                            Role.ASSISTANT, BlockLanguage.EN),
    ]
    assert [e.hit.memory.id for e in written.kept] == ["f", "other", "r"]


def test_episode_lines_name_the_speaker_outside_the_quote() -> None:
    assert episode_line("hi", WHEN, Role.USER, BlockLanguage.EN) == \
        '- [2026-05-01] the user said "hi"'
    assert episode_line("好", WHEN, Role.ASSISTANT, BlockLanguage.ZH) == \
        '- [2026-05-01] 助手说 "好"'
    assert episode_line("x", WHEN, None, BlockLanguage.EN) == format_line("x", WHEN)


def test_the_budget_keeps_priority_and_the_block_reads_in_order() -> None:
    entries = [("b", "- second in reading order " + "x " * 30), ("a", "- first"),
               ("c", "- dropped " + "y " * 200)]
    rank = {"a": 0, "b": 1, "c": 2}
    packed = pack(BlockLanguage.EN, entries, 80, estimate_tokens, order=rank.__getitem__)
    assert packed.kept == ["a", "b"]
    assert packed.block.splitlines()[1] == "- first"
    assert packed.omitted == 1
    assert packed.tokens <= 80

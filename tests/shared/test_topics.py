"""A fact's topics and its topic reading (shared/extraction/topics.py)."""

from __future__ import annotations

import pytest

from memoryd.extraction.topics import TOPICS, fact_reading, topic_reading, topics_of
from memoryd.index.reindex import stored_reading
from memoryd.records.models import MemoryKind


@pytest.mark.parametrize(("fact", "named"), [
    ("User moved to Berlin last month for a new job", {"home", "work"}),
    ("用户上个月搬到了成都", {"home"}),
    ("User and family adopted a cat named Luna two weeks ago", {"pets", "family"}),
    ("用户养了一只小狗", {"pets"}),
    ("User's brother Tom lives in Toronto", {"family", "home"}),
    ("用户的女儿今年上小学", {"family", "learning"}),
    ("User works as a data analyst at a logistics company", {"work"}),
    ("User's sister Anna is a nurse in Lisbon", {"family", "work"}),
    ("User saw a doctor about the rash", {"health"}),  # an occupation only as what one is
    ("用户下周三要去看牙医", {"health", "plans"}),
    ("用户在上海一家医院当医生", {"work", "health"}),
    ("用户在一家银行上班", {"work"}),
    ("User is allergic to peanuts", {"health"}),
    ("用户有高血压", {"health"}),
    ("User is learning Spanish on weekends", {"learning"}),
    ("User is vegetarian", {"health"}),
    ("用户最近在吃素", {"health"}),
    ("User plays tennis on Sundays", {"hobbies"}),
    ("用户周末经常去爬山", {"hobbies"}),
    ("用户最近在学游泳", {"learning", "hobbies"}),
    ("User can't stand cilantro", {"likes"}),
    ("用户最喜欢的水果是芒果", {"likes"}),
    ("User is going to Kyoto next month", {"plans"}),
    ("用户打算明年去日本", {"plans"}),
])
def test_everyday_facts_name_their_topics(fact: str, named: set[str]) -> None:
    assert {t.name for t in topics_of(fact)} == named


@pytest.mark.parametrize("fact", [
    "User's name is Wei",  # no topic: no reading, nothing more to embed
    "用户叫小王",
    "User's car is a blue Tesla",
])
def test_a_fact_of_no_topic_has_no_reading(fact: str) -> None:
    assert topics_of(fact) == [] and topic_reading(fact) is None


def test_the_reading_names_the_topics_in_both_languages_then_the_fact() -> None:
    fact = "User's sister Anna is a nurse in Lisbon"
    reading = topic_reading(fact)
    assert reading == "Family (家人); Work, job (工作): " + fact
    for topic in TOPICS:  # every label names the topic in English and in Chinese
        english, chinese = topic.label.split(" (")
        assert english.isascii() and not chinese.isascii()


def test_words_are_whole_words_in_english() -> None:
    # "ill" is not in "Bill", "rent" not in "current", "pet" not in "trumpet".
    assert topics_of("Bill bought a trumpet") == []
    assert topics_of("The current account") == []


def test_a_stored_fact_is_read_by_its_topics_when_embedded_again() -> None:
    # What `memoryd reindex` embeds a stored point with, beside its text.
    fact = "User is allergic to peanuts"
    assert stored_reading({"kind": "fact", "content": fact}) == "Health (健康): " + fact
    assert stored_reading({"kind": "episode", "content": "I am allergic to peanuts"}) is None
    assert stored_reading({"kind": "note", "content": fact}) is None
    # Stored before kinds existed: a fact is what an interaction gave as semantic memory.
    assert stored_reading({"source": "interaction", "type": "semantic", "content": fact}) \
        == "Health (健康): " + fact
    assert stored_reading({"source": "interaction", "type": "episodic", "content": fact}) \
        is None


def test_only_a_fact_has_a_reading() -> None:
    fact = "User is allergic to peanuts"
    assert fact_reading("fact", fact) == fact_reading(MemoryKind.FACT, fact) == \
        topic_reading(fact)
    assert fact_reading(MemoryKind.EPISODE, fact) is None
    assert fact_reading(MemoryKind.NOTE, fact) is None and fact_reading(None, fact) is None

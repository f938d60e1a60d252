"""Whose words a query asks about (shared/retrieval/speaker_cues.py): the user's own, in the
first person, unless it points at the assistant's earlier words; a request for new words
is no such pointer."""

from __future__ import annotations

import pytest

from memoryd.retrieval.speaker_cues import about_own_words


@pytest.mark.parametrize("query", [
    "Where did I meet Sophia?",
    "How many bikes do I own?",
    "What's my daughter called?",
    "I was thinking about rearranging the furniture in my bedroom. Any tips?",
    "Can you recommend some resources where I can learn video editing?",  # a request
    "Could you tell me a good recipe for my slow cooker?",
    "我的猫叫什么名字?",
    "我对什么过敏?",
    "你推荐什么零食给我?",  # a request: 你推荐 without 过/的
])
def test_first_person_questions_ask_about_the_users_own_words(query: str) -> None:
    assert about_own_words(query)


@pytest.mark.parametrize("query", [
    "What was the name of that hiking trail you recommended to me?",
    "How many eggs did you say I need for the omelette?",
    "I was looking back at our previous conversation about engagement rings.",
    "You mentioned a few apps I could try; which were they?",
    "I remember you provided me a list of prompt parameters.",
    "What did we discuss about my trip?",
    "Remind me of your earlier suggestion for my garden.",
    "你上次给我推荐的那家餐厅叫什么?",
    "你说过我应该每天练多久吉他?",
    "我们之前聊的那本书是什么?",
    "你推荐的零食我买了",
])
def test_pointing_at_the_assistants_earlier_words_is_not_about_oneself(query: str) -> None:
    assert not about_own_words(query)


@pytest.mark.parametrize("query", [
    "What did Melanie paint last year?",
    "When did Caroline go to the support group?",
    "孩子叫什么名字?",  # no pronoun: asks about no one's words in particular
    "",
])
def test_questions_without_the_first_person_ask_about_no_one(query: str) -> None:
    assert not about_own_words(query)

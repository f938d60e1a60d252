"""Everyday first-person statements give a fact; requests never do (issue 29 §1).

The default extraction keeps every turn as an episode, and the rules draw the facts beside
them: moving, pets, family, work, health, plans, likes and dislikes, learning, in English
and Chinese. A request the user adds to a statement is cut off; a request alone gives
nothing.
"""

from __future__ import annotations

import pytest

from memoryd.extraction.rules import extract_rules, extract_rules_sourced

# The statements issue 29 names: each must give this fact.
ISSUE_STATEMENTS = [
    ("I just moved to Berlin last month for a new job",
     "User just moved to Berlin last month for a new job"),
    ("We adopted a cat named Luna two weeks ago",
     "User and family adopted a cat named Luna two weeks ago"),
    ("I also have a dog named Rex", "User also has a dog named Rex"),
    ("我老婆下个月生日，她喜欢郁金香", "用户老婆下个月生日，她喜欢郁金香"),
    ("我最近在学吉他，每天练半个小时", "用户最近在学吉他，每天练半个小时"),
]

# (topic, statement, the fact it gives)
EVERYDAY = [
    ("moving", "I moved to Seattle in March", "User moved to Seattle in March"),
    ("moving", "We just moved into a new flat", "User and family just moved into a new flat"),
    ("moving", "I'm moving to Madrid next year", "User is moving to Madrid next year"),
    ("moving", "我搬到杭州了", "用户搬到杭州了"),
    ("moving", "我们刚搬家到深圳", "用户和家人刚搬家到深圳"),
    ("moving", "我下个月要搬到成都", "用户下个月要搬到成都"),
    ("pets", "I adopted a rescue dog", "User adopted a rescue dog"),
    ("pets", "I got a puppy", "User got a puppy"),
    ("pets", "We've got two cats", "User and family have got two cats"),
    ("pets", "My cat Mochi is 3 years old", "User's cat Mochi is 3 years old"),
    ("pets", "我们家养了两只猫", "用户家养了两只猫"),
    ("pets", "我也养了一只狗", "用户也养了一只狗"),
    ("family", "My wife loves tulips", "User's wife loves tulips"),
    ("family", "My parents live in Ohio", "User's parents live in Ohio"),
    ("family", "My son started school this week", "User's son started school this week"),
    ("family", "我女儿叫小美", "用户女儿叫小美"),
    ("family", "我爸妈住在老家", "用户爸妈住在老家"),
    ("family", "我老公是医生", "用户老公是医生"),
    ("work", "I just started a new job at Stripe", "User just started a new job at Stripe"),
    ("work", "I got promoted last week", "User got promoted last week"),
    ("work", "I've been working at Airbnb for five years",
     "User has been working at Airbnb for five years"),
    ("work", "I quit my job last week", "User quit their job last week"),
    ("work", "我在字节跳动上班", "用户在字节跳动上班"),
    ("work", "我刚换了新工作", "用户刚换了新工作"),
    ("work", "我最近在找工作", "用户最近在找工作"),
    ("work", "我在上海一家医院当医生", "用户在上海一家医院当医生"),
    ("health", "I was diagnosed with type 2 diabetes", "User was diagnosed with type 2 diabetes"),
    ("health", "I have asthma", "User has asthma"),
    ("health", "I can't eat gluten", "User can't eat gluten"),
    ("health", "I take medication for my blood pressure",
     "User takes medication for their blood pressure"),
    ("health", "我去年摔断了腿", "用户去年摔断了腿"),
    ("health", "我腰不好，不能久坐", "用户腰不好，不能久坐"),
    ("health", "我不能吃麸质", "用户不能吃麸质"),
    ("health", "I broke my arm skiing", "User broke their arm skiing"),
    ("health", "My mom has diabetes", "User's mom has diabetes"),
    ("health", "我有糖尿病", "用户有糖尿病"),
    ("health", "我最近失眠", "用户最近失眠"),
    ("health", "我妈妈有高血压", "用户妈妈有高血压"),
    ("plans", "I'm planning to visit Japan in April", "User is planning to visit Japan in April"),
    ("plans", "I hope to run a marathon next year", "User hopes to run a marathon next year"),
    ("plans", "我打算下个月去旅游", "用户打算下个月去旅游"),
    ("plans", "我计划明年考研", "用户计划明年考研"),
    ("plans", "We're planning to move to Hangzhou next year",
     "User and family are planning to move to Hangzhou next year"),
    ("plans", "下周三我要去看牙医", "用户下周三要去看牙医"),
    ("likes", "I love sushi", "User loves sushi"),
    ("likes", "I'm really into jazz", "User is really into jazz"),
    ("likes", "我最近喜欢上了爬山", "用户最近喜欢上了爬山"),
    ("dislikes", "I hate cilantro", "User hates cilantro"),
    ("dislikes", "我不喜欢吃香菜", "用户不喜欢吃香菜"),
    ("learning", "I started learning Japanese", "User started learning Japanese"),
    ("learning", "I'm taking piano lessons", "User is taking piano lessons"),
    ("learning", "I've been practicing yoga every morning",
     "User has been practicing yoga every morning"),
    ("learning", "I practice guitar every evening", "User practices guitar every evening"),
    ("learning", "我最近在学日语", "用户最近在学日语"),
    ("learning", "我每天练习书法", "用户每天练习书法"),
]

# A statement with a request or question after it: only the statement is a fact.
STATEMENT_THEN_REQUEST = [
    ("我对花生过敏,给我推荐点零食吧", "用户对花生过敏"),
    ("我对花生过敏，有什么零食推荐吗", "用户对花生过敏"),
    ("我喜欢科幻小说，给我推荐几本吧", "用户喜欢科幻小说"),
    ("我住在上海，周末去哪玩好", "用户住在上海"),
    ("我对海鲜过敏，帮我看看这个菜单", "用户对海鲜过敏"),
    ("我喜欢吃火锅，你呢", "用户喜欢吃火锅"),
    ("I'm vegan, can you suggest a recipe?", "User is vegan"),
    ("I live in Berlin, what should I visit?", "User lives in Berlin"),
    ("I have a dog, any tips for training him?", "User has a dog"),
    ("My daughter loves dinosaurs, suggest a birthday theme",
     "User's daughter loves dinosaurs"),
    ("I love Paris, what about you?", "User loves Paris"),
    ("I'm allergic to shellfish, can you suggest a recipe?", "User is allergic to shellfish"),
]

# Requests and chat about the task at hand: no fact.
REQUESTS = [
    "Can you recommend a good book?",
    "What should I cook tonight?",
    "Tell me a joke",
    "Write me a poem about cats",
    "I got an error in my code",
    "I started the server",
    "We have a problem",
    "I got a question",
    "My code is broken",
    "给我推荐点零食吧",
    "给我推荐几部电影",
    "帮我订一张机票",
    "帮我写一首诗",
    "你觉得我该怎么办",
    "我学到了很多",
    "我的猫呢",
]


@pytest.mark.parametrize(("message", "fact"), ISSUE_STATEMENTS)
def test_the_issues_statements_give_their_fact(message: str, fact: str) -> None:
    assert [c.content for c in extract_rules([message])] == [fact]


@pytest.mark.parametrize(("topic", "message", "fact"), EVERYDAY,
                         ids=[f"{t}:{m[:30]}" for t, m, _ in EVERYDAY])
def test_everyday_statements_give_a_fact(topic: str, message: str, fact: str) -> None:
    assert [c.content for c in extract_rules([message])] == [fact], topic


def test_the_table_covers_every_topic_in_both_languages() -> None:
    for topic in ("moving", "pets", "family", "work", "health", "plans", "likes", "learning"):
        messages = [m for t, m, _ in EVERYDAY if t == topic]
        assert any(m.isascii() for m in messages), topic
        assert any(not m.isascii() for m in messages), topic


@pytest.mark.parametrize(("message", "fact"), STATEMENT_THEN_REQUEST)
def test_a_request_after_a_statement_is_cut_off(message: str, fact: str) -> None:
    got = [c.content for c in extract_rules([message])]
    assert got == [fact]
    assert not any(word in got[0] for word in ("推荐", "给用户", "帮用户", "suggest", "tips"))


@pytest.mark.parametrize("message", REQUESTS)
def test_a_request_alone_gives_no_fact(message: str) -> None:
    assert extract_rules([message]) == []


def test_a_condition_is_not_cut_as_a_request() -> None:
    # Only requests and questions end a statement: a clause of another kind stays.
    assert [c.content for c in extract_rules(["I'll go hiking, if it's sunny"])] == [
        "User will go hiking, if it's sunny"]


def test_sourced_facts_name_every_message_that_states_them() -> None:
    got = extract_rules_sourced(
        ["I love sushi. 我搬到杭州了", "ok", "I love sushi!", "我搬到杭州了"])
    assert [(c.content, origins) for c, origins in got] == [
        ("User loves sushi", [0, 2]), ("用户搬到杭州了", [0, 3])]

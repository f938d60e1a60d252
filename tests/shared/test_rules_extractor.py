"""Rule-based extraction: a table of real-looking user messages and what they must yield."""

from __future__ import annotations

import dataclasses
import random
import string
import time

import pytest

from memoryd.extraction.rules import RuleCandidate, extract_rules

S, P = "semantic", "procedural"
PREF, FACT, PLAN, INSTR = "preference", "fact", "plan", "instruction"

# message -> [(content, type, category)]
CASES: list[tuple[str, list[tuple[str, str, str]]]] = [
    # English: explicit memory requests.
    ("Remember that I'm allergic to peanuts.", [("User is allergic to peanuts", S, FACT)]),
    ("Please remember my wife's name is Lisa", [("User's wife's name is Lisa", S, FACT)]),
    ("Don't forget that my birthday is May 3rd!", [("User's birthday is May 3rd", S, FACT)]),
    ("Note that I work at Google", [("User works at Google", S, FACT)]),
    ("Please remember: I take my coffee with oat milk",
     [("User takes their coffee with oat milk", S, FACT)]),
    ("I'm allergic to penicillin, remember that", [("User is allergic to penicillin", S, FACT)]),
    ("Can you remember that I'm vegan?", [("User is vegan", S, FACT)]),
    ("Remember to always cite sources", [("Always cite sources", P, INSTR)]),
    ("Remember: never call me Bobby", [("Never call the user Bobby", P, INSTR)]),
    # English: preferences.
    ("I like spicy food", [("User likes spicy food", S, PREF)]),
    ("I really love hiking in the mountains!",
     [("User really loves hiking in the mountains", S, PREF)]),
    ("I prefer dark mode in every app.", [("User prefers dark mode in every app", S, PREF)]),
    ("i can't stand cilantro", [("User can't stand cilantro", S, PREF)]),
    ("I don't like horror movies", [("User doesn't like horror movies", S, PREF)]),
    ("My favorite color is blue", [("User's favorite color is blue", S, PREF)]),
    ("I like my coffee black", [("User likes their coffee black", S, PREF)]),
    ("I'd prefer shorter answers", [("User would prefer shorter answers", S, PREF)]),
    ("Honestly, I hate mornings", [("User hates mornings", S, PREF)]),
    ("I'm not a fan of jazz", [("User is not a fan of jazz", S, PREF)]),
    # English: facts.
    ("My name is Ana", [("User's name is Ana", S, FACT)]),
    ("I'm a software engineer", [("User is a software engineer", S, FACT)]),
    ("I work as a nurse at the city hospital",
     [("User works as a nurse at the city hospital", S, FACT)]),
    ("I live in Berlin with my partner", [("User lives in Berlin with their partner", S, FACT)]),
    ("I have two cats named Tom and Jerry", [("User has two cats named Tom and Jerry", S, FACT)]),
    ("I'm allergic to shellfish", [("User is allergic to shellfish", S, FACT)]),
    ("I am 30 years old", [("User is 30 years old", S, FACT)]),
    ("My mom's name is Lisa", [("User's mom's name is Lisa", S, FACT)]),
    ("I stopped eating meat because I'm vegan",
     [("User stopped eating meat because the user is vegan", S, FACT)]),
    ("I went for a walk because I'm vegan", [("User is vegan", S, FACT)]),
    ("My wife and I live in Paris", [("User's wife and the user live in Paris", S, FACT)]),
    ("My name's Ana and I live in Porto",
     [("User's name is Ana and the user lives in Porto", S, FACT)]),
    ("I have a dog and I walk him daily",
     [("User has a dog and the user walks him daily", S, FACT)]),
    # English: plans.
    ("I plan to learn Japanese next year", [("User plans to learn Japanese next year", S, PLAN)]),
    ("I'm going to Paris next week", [("User is going to Paris next week", S, PLAN)]),
    ("Next week I'm flying to Tokyo", [("User is flying to Tokyo next week", S, PLAN)]),
    ("Tomorrow I have a dentist appointment",
     [("User has a dentist appointment tomorrow", S, PLAN)]),
    ("I'm planning a trip to Spain", [("User is planning a trip to Spain", S, PLAN)]),
    ("I will run a marathon in October", [("User will run a marathon in October", S, PLAN)]),
    ("We're planning to move to Hangzhou next year.",
     [("User and family are planning to move to Hangzhou next year", S, PLAN)]),
    ("I've been vegetarian for ten years.", [("User has been vegetarian for ten years", S, FACT)]),
    ("I don't drink coffee anymore.", [("User doesn't drink coffee anymore", S, FACT)]),
    ("I take medication for my blood pressure.",
     [("User takes medication for their blood pressure", S, FACT)]),
    ("I usually go to the gym in the morning.",
     [("User usually goes to the gym in the morning", S, FACT)]),
    ("I just finished my master's degree.",
     [("User just finished their master's degree", S, FACT)]),
    ("I'm trying to cut down on sugar.", [("User is trying to cut down on sugar", S, FACT)]),
    ("Our cat is called Mochi.", [("User and family's cat is called Mochi", S, FACT)]),
    ("I can't eat gluten.", [("User can't eat gluten", S, FACT)]),
    ("I typically run on roads, about 3 times a week",
     [("User typically runs on roads, about 3 times a week", S, FACT)]),
    # English: standing instructions.
    ("Always answer in English", [("Always answer in English", P, INSTR)]),
    ("never call me Bob", [("Never call the user Bob", P, INSTR)]),
    ("From now on, use metric units", [("From now on, use metric units", P, INSTR)]),
    ("Use metric units from now on", [("Use metric units from now on", P, INSTR)]),
    ("Please don't use emojis", [("Don't use emojis", P, INSTR)]),
    ("Could you please always reply in French?", [("Always reply in French", P, INSTR)]),
    ("Call me Sam", [("Call the user Sam", P, INSTR)]),
    # Chinese.
    ("我喜欢吃辣", [("用户喜欢吃辣", S, PREF)]),
    ("我最喜欢的颜色是蓝色", [("用户最喜欢的颜色是蓝色", S, PREF)]),
    ("我讨厌下雨天。", [("用户讨厌下雨天", S, PREF)]),
    ("我更喜欢用 Vim", [("用户更喜欢用 Vim", S, PREF)]),
    ("我偏好简洁的回答", [("用户偏好简洁的回答", S, PREF)]),
    ("我叫小明", [("用户叫小明", S, FACT)]),
    ("我是一名老师", [("用户是一名老师", S, FACT)]),
    ("我在腾讯工作", [("用户在腾讯工作", S, FACT)]),
    ("我住在上海", [("用户住在上海", S, FACT)]),
    ("我有一只猫", [("用户有一只猫", S, FACT)]),
    ("我的生日是5月3日", [("用户的生日是5月3日", S, FACT)]),
    ("我对花生过敏！", [("用户对花生过敏", S, FACT)]),
    ("我打算明年去日本留学", [("用户打算明年去日本留学", S, PLAN)]),
    ("明天我要去北京出差", [("用户明天要去北京出差", S, PLAN)]),
    ("我下周要去上海", [("用户下周要去上海", S, PLAN)]),
    ("我计划下个月换工作", [("用户计划下个月换工作", S, PLAN)]),
    ("下周三我要去看牙医", [("用户下周三要去看牙医", S, PLAN)]),
    ("我最近开始跑步", [("用户最近开始跑步", S, FACT)]),
    ("我特别怕看恐怖片", [("用户特别怕看恐怖片", S, PREF)]),
    ("我们明年要结婚了", [("用户和家人明年要结婚了", S, PLAN)]),
    ("我家有一只金毛，叫旺财", [("用户家有一只金毛，叫旺财", S, FACT)]),
    ("我去年摔断了腿", [("用户去年摔断了腿", S, FACT)]),
    ("我每周六打网球", [("用户每周六打网球", S, FACT)]),
    ("我在上海长大", [("用户在上海长大", S, FACT)]),
    ("我今年研究生毕业", [("用户今年研究生毕业", S, FACT)]),
    ("我开的是特斯拉", [("用户开的是特斯拉", S, FACT)]),
    ("我们家的猫叫咪咪", [("用户家的猫叫咪咪", S, FACT)]),
    ("我不能吃麸质", [("用户不能吃麸质", S, FACT)]),
    ("我腰不好，不能久坐", [("用户腰不好，不能久坐", S, FACT)]),
    ("我在上海一家医院当医生", [("用户在上海一家医院当医生", S, FACT)]),
    ("我每天早上喝一杯黑咖啡,不加糖", [("用户每天早上喝一杯黑咖啡,不加糖", S, FACT)]),
    ("我上个月买了一辆电动车", [("用户上个月买了一辆电动车", S, FACT)]),
    ("记住，我不吃香菜", [("用户不吃香菜", S, FACT)]),
    ("请记住我的邮箱是 ana@example.com", [("用户的邮箱是 ana@example.com", S, FACT)]),
    ("帮我记一下，明天下午三点开会", [("明天下午三点开会", S, FACT)]),
    ("别忘了我下周要出差", [("用户下周要出差", S, FACT)]),
    ("我的生日是5月3日，记住了", [("用户的生日是5月3日", S, FACT)]),
    ("记住：总是用中文回答我", [("总是用中文回答用户", P, INSTR)]),
    ("以后请用中文回答我", [("以后请用中文回答用户", P, INSTR)]),
    ("总是用简体中文回复", [("总是用简体中文回复", P, INSTR)]),
    ("不要用表情符号", [("不要用表情符号", P, INSTR)]),
    ("请叫我老王", [("叫用户老王", P, INSTR)]),
    ("你能不能以后都用中文回答我？", [("以后都用中文回答用户", P, INSTR)]),
    ("忘了告诉你，我对花生过敏", [("用户对花生过敏", S, FACT)]),
    # Mixed languages.
    ("Remember 我的生日是5月3日", [("用户的生日是5月3日", S, FACT)]),
    ("记住 I prefer dark mode", [("User prefers dark mode", S, FACT)]),
    ("我喜欢 Python 和 Rust", [("用户喜欢 Python 和 Rust", S, PREF)]),
    ("I live in 北京 and 我喜欢 Python", [("User lives in 北京 and 用户喜欢 Python", S, FACT)]),
    ("我的 email 是 ana@example.com", [("用户的 email 是 ana@example.com", S, FACT)]),
    ("好的，I'm a data scientist。我住在深圳",
     [("User is a data scientist", S, FACT), ("用户住在深圳", S, FACT)]),
    # Several sentences in one message, each split on its own punctuation.
    ("Thanks, my name is Ana. I'm a teacher; I live in Lisbon.\nI love fado!",
     [("User's name is Ana", S, FACT), ("User is a teacher", S, FACT),
      ("User lives in Lisbon", S, FACT), ("User loves fado", S, PREF)]),
]  # fmt: skip

NEGATIVES = [
    "ok thanks",
    "好的谢谢",
    "Thank you so much!",
    "哈哈，我爱你",
    "Do you remember what I said?",
    "Do you remember that I like tea?",
    "你记得我喜欢什么吗",
    "你还记得我住在哪里吗？",
    "What is my name?",
    "Remember when we went to Paris?",
    "If I were rich I would buy a boat",
    "如果我有钱，我会买一艘船",
    "我买了一些火车票",
    "I usually have a question about this",
    "I don't have much time",
    "I can't eat that",
    "I've been here for two hours",
    "我开始觉得你说得对",
    "我怕是来不及了",
    "我不能说",
    "我开始了",
    "我们计划一下吧",
    "我怕写不好",
    "我害怕极了",
    "I don't have time for this",
    "I've been using it for a few weeks now",
    "我平时看什么书好?",
    "we are going to try it",
    "假如我是老师，我会更耐心",
    "I wish I lived in Paris",
    "Don't remember that I like tea",
    "Forget that I live in Paris",
    "You don't need to remember my address",
    "不要记住这个",
    "不用记我的电话号码",
    "I have a question",
    "I have a quick question about Python",
    "I'm a bit confused",
    "I love it!",
    "I like that",
    "我有点累",
    "我是说这个不对",
    "我的意思是这个不行",
    "我准备好了",
    "I'm going to ask you something",
    "I'm going to bed",
    "I have a list of numbers and I need to find the max",
    "我有一个 bug 解决不了",
    "I hate when that happens",
    "I'm not sure what you mean",
    "I will send you the report tomorrow",
    "Never mind",
    "以后再说吧",
    "Can you tell me a joke?",
    "What's the weather like in Berlin?",
    "Is it going to rain tomorrow?",
    "How do I reverse a list in Python",
]

ODD_INPUTS = [
    "",
    " ",
    "\n\n\t",
    "...",
    "。。。！？",
    "?!?!",
    "🍕🍕🍕",
    "😀" * 1000,
    "\x00\x01\x02",
    "\ud800",  # a lone surrogate, possible after lenient JSON decoding
    "I",
    "我",
    "remember",
    "记住",
    "记住了",
    "Remember that",
    "I like",
    "my name is",
    "我的是",
    "I'm a",
    "'" * 50,
    "I like " + "x" * 500,
    "a" * 100_000,
    "I like tea. " * 9_000,
    "我喜欢吃辣。" * 20_000,
    ("I like a, " * 99 + "\n") * 100,
    "\u200b\u3000I\u00a0like\u2009tea\u200b",
]


@pytest.mark.parametrize(("message", "expected"), CASES, ids=[c[0][:40] for c in CASES])
def test_table(message: str, expected: list[tuple[str, str, str]]) -> None:
    got = [(c.content, c.type, c.category) for c in extract_rules([message])]
    assert got == expected


@pytest.mark.parametrize("message", NEGATIVES)
def test_negatives_yield_nothing(message: str) -> None:
    assert extract_rules([message]) == []


def test_table_is_large_and_covers_every_category_and_language() -> None:
    assert len(CASES) >= 25
    categories = {cat for _, expected in CASES for _, _, cat in expected}
    assert categories == {PREF, FACT, PLAN, INSTR}
    chinese = [m for m, _ in CASES if any("\u4e00" <= ch <= "\u9fff" for ch in m)]
    english = [m for m, _ in CASES if m.isascii()]
    assert len(chinese) >= 10 and len(english) >= 10


def test_importance_by_kind() -> None:
    got = extract_rules(
        [
            "Remember that I'm vegan",
            "I like tea",
            "I live in Rome",
            "I'm going to Oslo next week",
            "Always answer briefly",
            "Remember to always answer briefly in French",
        ]
    )
    assert [c.importance for c in got] == [8, 6, 6, 5, 7, 8]
    assert all(1 <= c.importance <= 10 for c in got)


def test_dedup_keeps_first_occurrence_and_order_across_messages() -> None:
    got = extract_rules(["I like tea. I live in Rome.", "I like tea!", "i like tea", "我喜欢猫"])
    assert [c.content for c in got] == ["User likes tea", "User lives in Rome", "用户喜欢猫"]


def test_candidates_are_frozen_values() -> None:
    (candidate,) = extract_rules(["I like tea"])
    assert candidate == RuleCandidate("User likes tea", "semantic", "preference", 6)
    with pytest.raises(dataclasses.FrozenInstanceError):
        candidate.content = "x"  # type: ignore[misc]


def test_curly_apostrophes_and_odd_spacing() -> None:
    got = extract_rules(["I’m allergic to   cats", "I\u00a0don’t like\tjazz"])
    assert [c.content for c in got] == ["User is allergic to cats", "User doesn't like jazz"]


def test_content_bounds() -> None:
    assert extract_rules(["I like " + "x" * 500]) == []
    assert extract_rules(["我爱猫"]) == [RuleCandidate("用户爱猫", "semantic", "preference", 6)]
    for candidate in extract_rules([m for m, _ in CASES]):
        assert 4 <= len(candidate.content) <= 400
        assert candidate.content == candidate.content.strip()
        assert not candidate.content.endswith((".", "!", "?", "。", "！", "？", ";", "；"))


@pytest.mark.parametrize("text", ODD_INPUTS, ids=range(len(ODD_INPUTS)))
def test_odd_inputs_never_crash(text: str) -> None:
    started = time.monotonic()
    got = extract_rules([text])
    assert time.monotonic() - started < 5
    for candidate in got:
        assert isinstance(candidate, RuleCandidate)
        assert 4 <= len(candidate.content) <= 400


def test_random_strings_never_crash() -> None:
    rng = random.Random(20240501)
    alphabet = (
        string.printable
        + "我你喜欢记住别忘了以后总是不要是有的在。！？；，、：“”‘’…"
        + "🍕😀\u200b\u3000\u00a0\x00\ud800"
    )
    words = ["I", "I'm", "my", "remember", "like", "always", "never", "我", "记住", "喜欢", "以后"]
    for _ in range(2000):
        parts = [
            rng.choice(words) if rng.random() < 0.3 else rng.choice(alphabet)
            for _ in range(rng.randint(0, 80))
        ]
        text = "".join(part + (" " if rng.random() < 0.5 else "") for part in parts)
        for candidate in extract_rules([text, text[::-1]]):
            assert 4 <= len(candidate.content) <= 400
            assert candidate.type in ("semantic", "procedural")


def test_empty_sequence_and_many_messages() -> None:
    assert extract_rules([]) == []
    assert extract_rules(("", "", "")) == []
    assert len(extract_rules([f"I have {n} cats" for n in range(200)])) == 200


def test_a_message_is_read_for_facts_up_to_its_sentence_bound() -> None:
    from memoryd.extraction.rules import MAX_SENTENCES, extract_rules

    filler = "".join(f"item {n}.\n" for n in range(MAX_SENTENCES + 10))
    early = extract_rules(["I live in Lisbon.\n" + filler])
    late = extract_rules([filler + "I live in Lisbon.\n"])
    assert [c.content for c in early] == ["User lives in Lisbon"]
    assert late == []  # past the bound: the episode keeps it, the rules do not read it

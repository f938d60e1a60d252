"""The retrieval protocol of ../shared/bench/README.md, rule by rule."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memoryd.evaluation import EvalError
from memoryd.evaluation import datasets as ds
from memoryd.evaluation.runner import parse_as_of, parse_modes


def test_evidence_is_split_on_semicolons_and_spaces() -> None:
    assert ds.parse_evidence(["D8:6; D9:17"]) == ["D8:6", "D9:17"]
    assert ds.parse_evidence(["D9:1 D4:4 D4:6"]) == ["D9:1", "D4:4", "D4:6"]
    assert ds.parse_evidence(["D1:3", "D1:3;D2:1"]) == ["D1:3", "D2:1"]


def test_evidence_ids_are_normalised() -> None:
    assert ds.normalize_dia_id("D:11:26") == "D11:26"
    assert ds.normalize_dia_id("D30:05") == "D30:5"
    assert ds.normalize_dia_id("D1:3") == "D1:3"
    assert ds.parse_evidence(["D:11:26; D30:05"]) == ["D11:26", "D30:5"]


def test_ids_that_do_not_parse_are_kept_so_they_fail_to_resolve() -> None:
    assert ds.parse_evidence(["D"]) == ["D"]


def test_session_dates() -> None:
    assert ds.parse_session_date("1:56 pm on 8 May, 2023") == datetime(
        2023, 5, 8, 13, 56, tzinfo=UTC
    )
    assert ds.parse_session_date("12:04 am on 19 December, 2023") == datetime(
        2023, 12, 19, 0, 4, tzinfo=UTC
    )
    assert ds.parse_session_date("12:30 pm on 1 January, 2024").hour == 12
    with pytest.raises(ValueError):
        ds.parse_session_date("8 May 2023")


def test_turn_content_carries_the_speaker_and_the_caption() -> None:
    assert ds.turn_content({"speaker": "Mel", "text": "Look!"}) == "Mel: Look!"
    turn = {"speaker": "Mel", "text": "Look!", "blip_caption": "a photo of a dog"}
    assert ds.turn_content(turn) == "Mel: Look! [image: a photo of a dog]"


def _sample() -> dict[str, object]:
    turns = [{"speaker": "A", "dia_id": f"D2:{i}", "text": f"t{i}"} for i in (1, 2)]
    return {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "A", "speaker_b": "B",
            "session_2_date_time": "9:00 am on 2 May, 2023", "session_2": turns,
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": "B", "dia_id": "D1:1", "text": "hi"}],
            # More date keys than sessions, as in conv-26: the sessions decide.
            "session_3_date_time": "1:00 pm on 9 May, 2023",
        },
        "qa": [
            {"question": "q0", "answer": "a", "evidence": ["D1:1"], "category": 4},
            {"question": "q1", "answer": "a", "evidence": ["D2:01; D:2:2", "D7:7"], "category": 1},
            {"question": "q2", "adversarial_answer": "a", "evidence": ["D1:1"], "category": 5},
            {"question": "q3", "answer": "a", "evidence": ["D9:9"], "category": 2},
            {"question": "q4", "answer": "a", "evidence": [], "category": 3},
        ],
    }


def test_conversation_sessions_in_order_with_one_second_per_turn() -> None:
    conv = ds.parse_conversation(_sample())
    assert [s.number for s in conv.sessions] == [1, 2]
    second = conv.sessions[1].turns
    assert [t.dia_id for t in second] == ["D2:1", "D2:2"]
    assert (second[1].created_at - second[0].created_at).total_seconds() == 1
    assert second[0].created_at == datetime(2023, 5, 2, 9, 0, tzinfo=UTC)


def test_questions_keep_categories_1_to_4_and_resolvable_evidence() -> None:
    sample = _sample()
    conv = ds.parse_conversation(sample)
    qset = ds.locomo_questions([sample], {conv.sample_id: conv.dia_ids()})
    assert [q.query for q in qset.questions] == ["q0", "q1"]
    assert qset.questions[1].relevant == ("D2:1", "D2:2")
    assert qset.questions[1].category == "multi-hop"
    assert qset.ignored_category == 1
    assert qset.skipped_no_evidence == 2  # q3 resolves to nothing, q4 has nothing
    assert qset.unresolved_ids == ["conv-x/D7:7", "conv-x/D9:9"]


def test_locomo_questions_are_asked_right_after_their_conversation(tmp_path: Path) -> None:
    """Each question reads time cues and recency against its conversation's calendar, not
    the run's clock, so two runs rank alike whenever they run; joining turns keeps it."""
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([_sample()]), encoding="utf-8")
    [conv], qset = ds.load_locomo(path)
    # The latest turn, not the last session's: session 1 is dated after session 2 here.
    last = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert max(t.created_at for s in conv.sessions for t in s.turns) == last
    assert [q.as_of for q in qset.questions] == [last + timedelta(seconds=1)] * 2
    _, joined = ds.long_turns([conv], qset, 200)
    assert [q.as_of for q in joined.questions] == [q.as_of for q in qset.questions]


def test_madial_query_is_the_three_lines_before_the_first_test_turn() -> None:
    dialogue = ["<BOD>\n", "<A>:\"1\"\n", "<B>:\"2\"\n", "<A>:\"3\"\n", "<B>:\"4\"\n",
                "<A>:\"5\"\n", "<EOD>\n"]
    assert ds.madial_query(dialogue, [4, 6]) == "<A>:\"1\"\n<B>:\"2\"\n<A>:\"3\""
    assert ds.madial_query(dialogue, [6, 5]) == "<B>:\"2\"\n<A>:\"3\"\n<B>:\"4\""
    # Fewer than three lines before the turn: <BOD> (even with stray spaces) is not text.
    assert ds.madial_query([" <BOD>\n", *dialogue[1:]], [2]) == "<A>:\"1\""


def test_madial_files_with_string_and_integer_ids(tmp_path: Path) -> None:
    memory = tmp_path / "memory.json"
    memory.write_text("\n".join(json.dumps(line, ensure_ascii=False) for line in [
        {"1": {"time": "2023-12-25", "event": "跳舞", "user-id": 1, "id": "1"}},
        {"7": {"time": "2023-03-07", "event": "跑步", "user-id": 2, "id": "7"}},
    ]) + "\n", "utf-8")
    dialogue = tmp_path / "dialogue.json"
    lines = [
        {"dialogue": ["<BOD>\n", "a\n", "b\n", "c\n", "d\n"], "test-turn": [4],
         "relevant-id": [1, 7], "user-id": 1, "id": 0},
        {"dialogue": ["<BOD>\n", "a\n", "b\n", "c\n"], "test-turn": [3],
         "relevant-id": [1], "user-id": 2, "id": 1},
    ]
    dialogue.write_text("\n".join(json.dumps(x) for x in lines) + "\n", "utf-8")
    memories = ds.load_madial_memories(memory)
    assert memories[0] == ds.MadialMemory("1", "1", "跳舞", datetime(2023, 12, 25, tzinfo=UTC))
    known = {"1": {"1"}, "2": {"7"}}
    qset = ds.load_madial_questions(dialogue, known)
    assert [(q.qid, q.user_id, q.relevant) for q in qset.questions] == [("dialogue-0", "1", ("1",))]
    assert qset.questions[0].query == "a\nb\nc"
    # Memory 7 is user 2's, and dialogue 1 names only user 1's memory: neither counts.
    assert qset.skipped_no_evidence == 1
    assert qset.unresolved_ids == ["1/7", "2/1"]


def test_a_mixed_madial_archive_takes_odd_ids_from_the_other_language() -> None:
    when = datetime(2023, 1, 1, tzinfo=UTC)
    zh = [ds.MadialMemory(i, "1", f"中文{i}", when) for i in ("1", "2", "3", "4")]
    en = [ds.MadialMemory(i, "1", f"english {i}", when) for i in ("1", "2", "3", "4")]
    assert [m.event for m in ds.mixed_madial_memories(zh, en)] == [
        "english 1", "中文2", "english 3", "中文4"]
    with pytest.raises(ValueError, match="memory 3 of user 1"):
        ds.mixed_madial_memories(zh, en[:2])


def test_long_sessions_are_split_into_interactions_of_at_most_max_messages() -> None:
    turns = [{"speaker": "A", "dia_id": f"D1:{i}", "text": f"t{i}"} for i in range(1, 8)]
    sample = {"sample_id": "c", "qa": [], "conversation": {
        "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": turns}}
    corpus = ds.locomo_corpus([ds.parse_conversation(sample)], max_messages=3)
    parts = corpus.users["c"]
    assert [len(p.items) for p in parts] == [3, 3, 1]
    assert len({p.idempotency_key for p in parts}) == 3
    assert [i.key for p in parts for i in p.items] == [f"D1:{i}" for i in range(1, 8)]
    assert ds.chunks([1, 2, 3, 4], 2) == [[1, 2], [3, 4]]


def test_modes_and_as_of_options() -> None:
    assert parse_modes(["dense,keyword", "hybrid", "dense"]) == ["dense", "keyword", "hybrid"]
    with pytest.raises(EvalError):
        parse_modes(["sparse"])
    assert parse_as_of("2024-01-01") == datetime(2024, 1, 1, tzinfo=UTC)
    assert parse_as_of(None) is None
    with pytest.raises(EvalError):
        parse_as_of("yesterday")


def test_missing_or_malformed_data_is_a_clear_cli_error(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from memoryd.workers.cli import app

    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a list of conversations"}')
    for path, expected in ((tmp_path / "absent.json", "cannot read"),
                           (bad, "not in the benchmark's format")):
        result = CliRunner().invoke(app, ["eval", "locomo", "--data", str(path)])
        assert result.exit_code == 1, result.output
        assert expected in " ".join(result.output.split())
        assert "Traceback" not in result.output


def test_long_turns_join_a_sessions_turns_and_carry_the_evidence() -> None:
    start = datetime(2023, 5, 8, tzinfo=UTC)
    turns = tuple(ds.Turn(f"D1:{i}", f"Speaker: sentence number {i} " + "x" * 40, start)
                  for i in range(1, 21))
    conv = ds.Conversation("conv-x", (ds.Session(1, turns),))
    qset = ds.QuestionSet([ds.Question("conv-x/q0", "conv-x", "?", "single-hop",
                                       ("D1:2", "D1:3", "D1:19"))], 0, [], 0)
    [merged], long_q = ds.long_turns([conv], qset, 200)
    joined = merged.sessions[0].turns
    assert "\n".join(t.content for t in joined) == "\n".join(t.content for t in turns)
    lengths = [len(t.content) for t in joined]
    # Lengths follow the shape: about the length, half of it, the length, 2.5 times it.
    assert lengths[0] > 200 and lengths[1] > 100 and lengths[3] > 500
    key_of = {t.dia_id: m.dia_id for m in joined for t in turns if t.content in m.content}
    assert long_q.questions[0].relevant == tuple(dict.fromkeys(
        key_of[i] for i in ("D1:2", "D1:3", "D1:19")))
    assert all(k in {m.dia_id for m in joined} for k in long_q.questions[0].relevant)


# ---- LongMemEval and the chat protocol ------------------------------------------------------

def _lme_item(qid: str, qtype: str) -> dict[str, object]:
    return {
        "question_id": qid, "question_type": qtype, "question": "Where did I move?",
        "question_date": "2023/06/01 (Thu) 10:00", "answer": "Berlin",
        "answer_session_ids": ["answer_s2"],
        "haystack_session_ids": ["s1", "answer_s2"],
        "haystack_dates": ["2023/05/30 (Tue) 23:40", "2023/05/31 (Wed) 08:05"],
        "haystack_sessions": [
            [{"role": "user", "content": "Any tips for sourdough?"},
             {"role": "assistant", "content": "Feed the starter daily."},
             {"role": "user", "content": "\u200b"}],
            [{"role": "user", "content": "I moved to Berlin last week.", "has_answer": True},
             {"role": "assistant", "content": "Welcome to Berlin!"}],
        ],
    }


def test_longmemeval_turns_sessions_and_questions() -> None:
    lme = ds.parse_longmemeval([_lme_item("q1", "single-session-user"),
                                _lme_item("q2", "multi-session")])
    assert lme.empty_turns == 2  # the "\u200b" turn of each haystack, left out
    first = lme.dialogues[0]
    assert first.user_id == "q1" and first.turn_count() == 4
    s1, s2 = first.sessions
    assert [t.key for t in s1.turns] == ["s1:0", "s1:1"]
    assert [t.role for t in s1.turns] == ["user", "assistant"]
    assert s2.turns[0].created_at == datetime(2023, 5, 31, 8, 5, tzinfo=UTC)
    assert s2.turns[1].created_at == datetime(2023, 5, 31, 8, 5, 1, tzinfo=UTC)
    q = lme.questions.questions[0]
    assert (q.user_id, q.category, q.relevant, q.sessions) == (
        "q1", "single-session-user", ("answer_s2:0",), ("answer_s2",))
    assert q.as_of == datetime(2023, 6, 1, 10, 0, tzinfo=UTC)
    assert ds.session_of("answer_s2:0") == "answer_s2"


def test_longmemeval_reads_xz_and_corpus_keeps_roles(tmp_path: Path) -> None:
    import lzma

    path = tmp_path / "lme.json.xz"
    path.write_bytes(lzma.compress(json.dumps([_lme_item("q1", "knowledge-update")]).encode()))
    lme = ds.load_longmemeval(path)
    corpus = ds.dialogue_corpus(lme.dialogues, max_messages=1, prefix="t")
    assert corpus.key_field == "turn" and corpus.store_roles == ("user", "assistant")
    items = [it for inter in corpus.users["q1"] for it in inter.items]
    assert [(it.key, it.role) for it in items] == [
        ("s1:0", "user"), ("s1:1", "assistant"), ("answer_s2:0", "user"),
        ("answer_s2:1", "assistant")]
    assert [i.thread_id for i in corpus.users["q1"]] == ["s1", "s1", "answer_s2", "answer_s2"]
    with pytest.raises(ValueError, match="not a LongMemEval date"):
        ds.parse_longmemeval_date("May 30, 2023")


def test_locomo_speaker_a_is_the_user_and_posts_group_a_turn_with_its_replies() -> None:
    from memoryd.evaluation.chat import chat_posts

    sample = {"sample_id": "c1", "qa": [], "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Bob", "dia_id": "D1:1", "text": "Hi Ann"},
            {"speaker": "Ann", "dia_id": "D1:2", "text": "I got a cat"},
            {"speaker": "Bob", "dia_id": "D1:3", "text": "Nice"},
            {"speaker": "Bob", "dia_id": "D1:4", "text": "Name?"},
            {"speaker": "Ann", "dia_id": "D1:5", "text": "Luna"},
        ]}}
    (dialogue,) = ds.locomo_dialogues([ds.parse_conversation(sample)])
    roles = [t.role for t in dialogue.sessions[0].turns]
    assert roles == ["assistant", "user", "assistant", "assistant", "user"]
    posts = chat_posts(dialogue, "x", max_messages=64)
    assert [[t.key for t in p.turns] for p in posts] == [
        ["D1:1"], ["D1:2", "D1:3", "D1:4"], ["D1:5"]]
    assert {p.thread_id for p in posts} == {"session-1"}
    assert len({p.idempotency_key for p in posts}) == 3
    cut = chat_posts(dialogue, "x", max_messages=2)
    assert [[t.key for t in p.turns] for p in cut] == [
        ["D1:1"], ["D1:2", "D1:3"], ["D1:4"], ["D1:5"]]


def test_evidence_is_read_from_sources_then_from_the_memory() -> None:
    from memoryd.evaluation.chat import evidence_keys

    fact = {"metadata": {}, "sources": [{"metadata": {"dia_id": "D1:2"}},
                                        {"metadata": {"dia_id": "D1:5"}}, {"metadata": {}}]}
    assert evidence_keys(fact, "dia_id") == {"D1:2", "D1:5"}
    assert evidence_keys({"metadata": {"dia_id": "D3:1", "role": "user"}}, "dia_id") == {"D3:1"}
    assert evidence_keys({"metadata": {"role": "user"}}, "dia_id") == set()


def test_per_category_takes_the_first_questions_of_each_kind() -> None:
    from memoryd.evaluation.runner import EvalOptions, select_questions

    qs = [ds.Question(f"q{i}", "u", "?", cat, ("k",))
          for i, cat in enumerate(["a", "a", "a", "b", "b", "c"])]
    picked = select_questions(EvalOptions("longmemeval", ["hybrid"], per_category=2), qs)
    assert [q.qid for q in picked] == ["q0", "q1", "q3", "q4", "q5"]


def test_longmemeval_limit_conversations_cuts_haystacks_that_is_questions() -> None:
    """Each LongMemEval question owns its haystack: `--limit-conversations N` keeps the first
    N questions (it was read for LoCoMo and MADial only, and silently ignored here)."""
    from memoryd.evaluation.runner import EvalOptions, select_questions

    qs = [ds.Question(f"q{i}", f"u{i}", "?", cat, ("k",))
          for i, cat in enumerate(["a", "b", "a", "c"])]
    picked = select_questions(EvalOptions("longmemeval", ["hybrid"], limit_conversations=3), qs)
    assert [q.qid for q in picked] == ["q0", "q1", "q2"]
    both = EvalOptions("longmemeval", ["hybrid"], limit_conversations=3, per_category=1)
    assert [q.qid for q in select_questions(both, qs)] == ["q0", "q1"]


def test_a_session_repeated_in_a_haystack_is_posted_under_keys_of_its_own() -> None:
    """LongMemEval's dev half holds one session twice, on two dates: each post is its own
    request, so each needs its own idempotency key, in both protocols."""
    from memoryd.evaluation.chat import chat_posts

    item = _lme_item("q1", "single-session-user")
    item["haystack_session_ids"] = ["s1", "answer_s2", "s1"]
    item["haystack_dates"] = [*item["haystack_dates"], "2023/06/01 (Thu) 08:00"]
    item["haystack_sessions"] = [*item["haystack_sessions"], item["haystack_sessions"][0]]
    [dialogue] = ds.parse_longmemeval([item]).dialogues
    ranked = [i.idempotency_key for i in ds.dialogue_corpus([dialogue], 8, "lme").users["q1"]]
    assert len(ranked) == 3 and len(set(ranked)) == 3
    assert ranked[0] == "eval-lme-q1-s1-c0" and ranked[2] == "eval-lme-q1-s1-r1-c0"
    posted = [p.idempotency_key for p in chat_posts(dialogue, "lme", 50)]
    assert len(posted) == len(set(posted)) == 3


def test_a_key_written_twice_is_accounted_for(tmp_path: Path) -> None:
    """LongMemEval's dev half repeats a session on another date; where a repeated turn is not
    merged into its first memory, the key has two memories, and the ingest's check that
    every stored memory came from a job must count both (it failed a 50-minute run). The
    stack runs in a process of its own, as `memoryd eval` runs it: an in-process stack
    would replace this test process's runtime under the suite's shared stack."""
    import subprocess
    import sys

    code = """
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from memoryd.evaluation import datasets as ds
from memoryd.evaluation.ingest import ingest
from memoryd.workers.eval_stack import embedded_stack
at = datetime(2023, 5, 1, tzinfo=UTC)
first = ds.Interaction("eval-repeat-s1-c0", [ds.Item("s1:0", "I keep bees in Ghent", at)])
again = ds.Interaction("eval-repeat-s1-r1-c0",
                       [ds.Item("s1:0", "Since May I have kept bees in Ghent, two hives", at)])
corpus = ds.Corpus("turn_key", {"beekeeper": [first, again]})
with embedded_stack(Path(sys.argv[1]), None) as (base_url, _):
    outcome = ingest(base_url, corpus, 1)
print(outcome.items, outcome.memories, outcome.jobs)
"""
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "data")],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-3:] == ["2", "2", "2"]

"""`memoryd eval` as a user runs it, on tiny datasets in LoCoMo's and MADial's exact shapes:
its own stack, ingest through the write path, every mode through the gateway, a report.

A subprocess, because the embedded stack sets process-wide state (the runtime, the Celery
app) that the session's shared test stack also uses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
MODES = ["dense", "keyword", "hybrid"]
TARGET = "conv-a/q0"


def _turns(session: int, lines: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [
        {"speaker": speaker, "dia_id": f"D{session}:{i}", "text": text}
        for i, (speaker, text) in enumerate(lines, start=1)
    ]


def locomo_data() -> list[dict[str, Any]]:
    conv_a = {
        "speaker_a": "Caroline", "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": _turns(1, [
            ("Caroline", "Hey Mel! How have you been?"),
            ("Melanie", "I ran my first marathon in Boston last month."),
            ("Caroline", "That is amazing, congratulations!"),
            ("Melanie", "Thanks! My legs still hurt a bit."),
        ]),
        "session_2_date_time": "10:04 am on 19 June, 2023",
        # Six turns: with MEMORYD_MAX_MESSAGES=4 this session goes in two interactions.
        "session_2": _turns(2, [
            ("Caroline", "I started a pottery class on Saturdays."),
            ("Melanie", "Oh nice, what have you made so far?"),
            ("Caroline", "I adopted a grey cat named Pixel last Tuesday."),
            ("Melanie", "A cat! My kids would love to meet her."),
            ("Caroline", "She sleeps on my keyboard all day."),
            ("Melanie", "Classic cat behaviour."),
        ]),
        "session_3_date_time": "7:30 pm on 2 August, 2023",
        "session_3": _turns(3, [
            ("Melanie", "We went camping at the lake with the kids."),
            ("Caroline", "Did you catch any fish?"),
            ("Melanie", "Two trout, and we grilled them by the fire."),
            ("Caroline", "Sounds like a perfect weekend."),
        ]),
    }
    conv_a["session_2"][1]["blip_caption"] = "a photo of a clay bowl"
    conv_b = {
        "speaker_a": "Jon", "speaker_b": "Gina",
        "session_1_date_time": "9:00 am on 3 March, 2023",
        "session_1": _turns(1, [
            ("Jon", "I lost my job at the bank."),
            ("Gina", "Oh no."),
            ("Jon", "I want to open a dance studio."),
        ]),
        "session_2_date_time": "6:15 pm on 20 April, 2023",
        "session_2": _turns(2, [
            ("Gina", "Oh no."),  # the same words at another time: another event, kept
            ("Jon", "The studio opens next Friday downtown."),
            ("Gina", "I will bring flowers to the opening."),
        ]),
    }
    return [
        {"sample_id": "conv-a", "conversation": conv_a, "qa": [
            {"question": "What is the name of the grey cat Caroline adopted last Tuesday?",
             "answer": "Pixel", "evidence": ["D2:3"], "category": 4},
            {"question": "Where did Melanie run her first marathon?", "answer": "Boston",
             "evidence": ["D1:02; D:1:4"], "category": 1},
            {"question": "What did Caroline say about Melanie's marathon?",
             "adversarial_answer": "x", "evidence": ["D1:3"], "category": 5},
            {"question": "What did Melanie catch at the lake?", "answer": "trout",
             "evidence": ["D3:3 D9:99"], "category": 2},
            {"question": "What class did Caroline start?", "answer": "pottery",
             "evidence": ["D7:7"], "category": 4},
        ]},
        {"sample_id": "conv-b", "conversation": conv_b, "qa": [
            {"question": "How did Gina react?", "answer": "oh no",
             "evidence": ["D2:1"], "category": 3},
            {"question": "When does Jon's dance studio open?", "answer": "next Friday",
             "evidence": ["D2:2"], "category": 2},
        ]},
    ]


def madial_files(tmp: Path) -> tuple[Path, Path]:
    memories = [
        ("1", 1, "2023-12-25", "Bart在圣诞节晚会上跳舞，感觉非常开心。"),
        ("3", 1, "2023-03-07", "Bart在学校的体育节上获得男子一百米第一名，感到非常开心。"),
        ("4", 1, "2023-05-15", "Bart在新开的冰淇淋店尝试了芒果口味的冰淇淋，感到非常开心。"),
        ("41", 2, "2023-02-01", "Lisa第一次学会了骑自行车，感到很自豪。"),
        ("45", 2, "2023-06-09", "Lisa的小狗生病了，她很难过。"),
    ]
    memory = tmp / "memory.json"
    memory.write_text("".join(
        json.dumps({mid: {"time": t, "scene": "活动类", "emotion": "开心", "event": event,
                          "user-id": user, "id": mid}}, ensure_ascii=False) + "\n"
        for mid, user, t, event in memories
    ), "utf-8")
    dialogues = [
        {"dialogue": ["<BOD>\n", "<Bart>:\"我今天吃了一个冰淇淋！\"\n",
                      "<Assistant>:\"什么口味的？\"\n", "<Bart>:\"芒果口味的，新开的冰淇淋店。\"\n",
                      "<Assistant>:\"你上次也很喜欢芒果冰淇淋！\"\n", "<EOD>\n"],
         "test-turn": [4], "relevant-id": [4], "user-id": 1, "id": 0},
        {"dialogue": [" <BOD>\n", "<Lisa>:\"我的小狗今天不吃东西。\"\n",
                      "<Assistant>:\"它还好吗？\"\n", "<EOD>\n"],
         "test-turn": [2, 3], "relevant-id": [45, 3], "user-id": 2, "id": 1},
    ]
    dialogue = tmp / "dialogue.json"
    dialogue.write_text(
        "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in dialogues), "utf-8"
    )
    return memory, dialogue


def run_eval(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    env.update({"MEMORYD_MAX_MESSAGES": "4", "MEMORYD_LOG_JSON": "true", "COLUMNS": "120"})
    return subprocess.run(
        [sys.executable, "-m", "memoryd.workers.cli", "eval", *args, "--mode", "dense,keyword",
         "--mode", "hybrid"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=150,
    )


def test_locomo_end_to_end(tmp_path: Path) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps(locomo_data()), "utf-8")
    out = tmp_path / "report.json"
    done = run_eval(["locomo", "--data", str(data), "--out", str(out),
                     "--data-dir", str(tmp_path / "store"), "--calibration"])
    assert done.returncode == 0, done.stdout + done.stderr
    for mode in MODES:
        assert f"mode={mode}" in done.stdout
        assert f"calibration ({mode}): evidence-bearing top hit" in done.stdout
    report = json.loads(out.read_text())
    assert report["dataset"] == "locomo" and report["embedder"] == "e5-small"
    assert report["modes"] == MODES and report["git"]["commit"]
    # Where it ran: a rate or a latency is the host's.
    assert report["machine"]["nproc"] >= 1 and "cpu_features" in report["machine"]
    assert report["counts"] == {
        "users": 2, "items": 20, "memories": 20, "merged_items": 0,
        "questions_evaluated": 5, "questions_skipped_no_evidence": 1,
        "questions_ignored_category": 1, "questions_left_out_by_limit": 0,
        "questions_with_merged_evidence": 0, "unresolved_evidence_ids": 2,
        "empty_turns_left_out": 0, "crowd_memories": 0,
    }
    assert report["merged_keys"] == []
    assert sorted(report["unresolved_ids"]) == ["conv-a/D7:7", "conv-a/D9:99"]
    assert report["ingest"]["jobs"] == 6 and report["ingest"]["memories_per_s"] > 0
    by_mode = {r["mode"]: r for r in report["results"]}
    assert list(by_mode) == MODES
    for mode, result in by_mode.items():
        assert result["overall"]["count"] == 5
        assert set(result["overall"]["metrics"]) == {"recall@5", "recall@10", "hit@10"}
        assert set(result["categories"]) <= {"multi-hop", "temporal", "open-domain",
                                             "single-hop"}
        assert result["latency"]["mean_ms"] > 0 and result["latency"]["p95_ms"] > 0
        scores = {q["qid"]: q["scores"] for q in result["questions"]}
        assert "conv-a/q2" not in scores  # category 5
        assert scores["conv-b/q0"]["recall@10"] == 1.0, mode  # its repeated turn is kept
        if mode != "keyword":
            assert scores[TARGET]["recall@10"] == 1.0, mode
            assert result["rankings"][TARGET][0] == "D2:3", mode
        # Every question was asked of the other conversation's user too.
        cal = result["calibration"]
        assert cal["other_user_questions"] == 5
        assert 1 <= cal["evidence_top_hits"] <= 5
        for share in ("top_hit_labelled_relevant", "other_user_nothing_relevant"):
            assert 0.0 <= cal[share] <= 1.0


def test_madial_end_to_end(tmp_path: Path) -> None:
    """With `--crowd`: memories of unrelated users are stored first, and recorded."""
    memory, dialogue = madial_files(tmp_path)
    out = tmp_path / "report.json"
    done = run_eval(["madial", "--memory", str(memory), "--dialogue", str(dialogue),
                     "--out", str(out), "--crowd", "250"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "storing 250 memories of unrelated users first" in done.stdout
    report = json.loads(out.read_text())
    assert report["counts"]["memories"] == 5 and report["counts"]["users"] == 2
    assert report["counts"]["crowd_memories"] == 250 and report["inputs"]["crowd"] == "250"
    assert report["ingest"]["crowd_users"] == 2
    assert report["counts"]["questions_evaluated"] == 2
    assert report["unresolved_ids"] == ["2/3"]  # memory 3 is user 1's, not Lisa's
    for result in report["results"]:
        assert set(result["overall"]["metrics"]) == {"recall@5", "recall@10", "hit@5"}
        # No user has more than three memories, so the top 5 holds every relevant one.
        assert result["overall"]["metrics"]["hit@5"] == 1.0
        assert result["rankings"]["dialogue-1"][0] == "45", result["mode"]


def test_madial_mixed_archive_end_to_end(tmp_path: Path) -> None:
    # The same set with the odd ids in English: the Chinese question about the mango ice
    # cream (memory 4, Chinese) and the one about Lisa's puppy (memory 45, English).
    memory, dialogue = madial_files(tmp_path)
    english = tmp_path / "memory-en.json"
    english.write_text("".join(
        json.dumps({mid: {"time": t, "event": event, "user-id": user, "id": mid}}) + "\n"
        for mid, user, t, event in [
            ("1", 1, "2023-12-25", "Bart danced at the Christmas party and felt happy."),
            ("3", 1, "2023-03-07", "Bart won the boys' 100-meter race at school."),
            ("4", 1, "2023-05-15", "Bart tried mango ice cream at a new shop."),
            ("41", 2, "2023-02-01", "Lisa learned to ride a bicycle and felt proud."),
            ("45", 2, "2023-06-09", "Lisa's puppy got sick and she was sad."),
        ]), "utf-8")
    out = tmp_path / "report.json"
    done = run_eval(["madial", "--memory", str(memory), "--odd-memory", str(english),
                     "--dialogue", str(dialogue), "--out", str(out), "--name", "mixed"])
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["inputs"]["odd_memory"] == str(english)
    assert report["counts"]["memories"] == 5 and report["counts"]["questions_evaluated"] == 2
    for result in report["results"]:
        assert result["rankings"]["dialogue-0"][0] == "4", result["mode"]
        assert result["rankings"]["dialogue-1"][0] == "45", result["mode"]
    missing = english.read_text().splitlines()[:-1]
    english.write_text("\n".join(missing) + "\n", "utf-8")
    refused = run_eval(["madial", "--memory", str(memory), "--odd-memory", str(english),
                        "--dialogue", str(dialogue)])
    assert refused.returncode == 1 and "memory 45 of user 2" in refused.stdout

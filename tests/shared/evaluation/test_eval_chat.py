"""`memoryd eval --protocol chat` and LongMemEval ranking as a user runs them, on tiny data in
the benchmarks' exact shapes; and the chat protocol's evidence check against the real
gateway."""

from __future__ import annotations

import json
import lzma
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import wait_job

from memoryd.evaluation import chat
from memoryd.evaluation import datasets as ds

ROOT = Path(__file__).resolve().parents[3]


def lme_data() -> list[dict[str, Any]]:
    def item(qid: str, qtype: str, question: str, answer_turn: str, date: str
             ) -> dict[str, Any]:
        return {
            "question_id": qid, "question_type": qtype, "question": question,
            "question_date": "2023/06/01 (Thu) 10:00", "answer": "x",
            "answer_session_ids": ["answer_1"],
            "haystack_session_ids": ["noise_1", "answer_1"],
            "haystack_dates": ["2023/05/20 (Sat) 09:00", date],
            "haystack_sessions": [
                [{"role": "user", "content": "Can you suggest a sourdough feeding schedule?"},
                 {"role": "assistant", "content": "Feed your starter twice a day at 1:1:1."},
                 {"role": "user", "content": "\u200b"}],
                [{"role": "user", "content": answer_turn, "has_answer": True},
                 {"role": "assistant", "content": "That sounds lovely, congratulations!"},
                 {"role": "assistant", "content": "Anything else I can help with?"},
                 {"role": "user", "content": "What is the capital of Australia?"},
                 {"role": "assistant", "content": "Canberra is the capital of Australia."}],
            ],
        }

    return [
        item("q-move", "single-session-user", "Which city did I move to?",
             "I moved to Berlin last month for a new job at a bike shop.",
             "2023/05/28 (Sun) 18:30"),
        item("q-cat", "multi-session", "What is the name of the cat I adopted?",
             "We adopted a grey cat named Luna two weeks ago.", "2023/05/29 (Mon) 20:00"),
    ]


def run_eval(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    env.update({"MEMORYD_LOG_JSON": "true", "COLUMNS": "160"})
    return subprocess.run([sys.executable, "-m", "memoryd.workers.cli", "eval", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=150)


def write_lme(tmp: Path) -> Path:
    path = tmp / "lme.json.xz"
    path.write_bytes(lzma.compress(json.dumps(lme_data()).encode("utf-8")))
    return path


def test_longmemeval_ranking_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    done = run_eval(["longmemeval", "--data", str(write_lme(tmp_path)), "--out", str(out)])
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["counts"]["empty_turns_left_out"] == 2
    assert report["counts"]["users"] == 2 and report["counts"]["items"] == 14
    assert report["counts"]["memories"] == 14
    (result,) = report["results"]
    assert set(result["overall"]["metrics"]) == {"ndcg@10", "session_recall_all@5",
                                                 "recall@10"}
    assert list(result["categories"]) == ["single-session-user", "multi-session"]
    # Seven turns each: every answer turn and its session are in the top 10.
    assert result["overall"]["metrics"]["recall@10"] == 1.0
    assert result["overall"]["metrics"]["session_recall_all@5"] == 1.0
    for qid, turn in (("q-move", "answer_1:0"), ("q-cat", "answer_1:0")):
        assert turn in result["rankings"][qid]
        assert all(":" in key for key in result["rankings"][qid])


def test_chat_protocol_end_to_end_on_longmemeval(tmp_path: Path) -> None:
    out = tmp_path / "chat.json"
    done = run_eval(["longmemeval", "--data", str(write_lme(tmp_path)), "--protocol", "chat",
                     "--out", str(out)])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "protocol=chat" in done.stdout and "/v1/context" in done.stdout
    report = json.loads(out.read_text())
    assert report["protocol"] == "chat" and report["name"] == "longmemeval"
    assert report["machine"]["nproc"] >= 1 and "cpu_features" in report["machine"]
    ingest = report["ingest"]
    # Per user: session 1 is one user turn and its reply (the empty turn is left out);
    # session 2 is two user turns, each with the replies after it.
    assert ingest["turns"] == 14 and ingest["interactions"] == 6
    assert ingest["turns_per_s"] > 0 and ingest["memories_before"] == 0  # a fresh store
    assert ingest["memories_per_turn"] == round(ingest["memories"] / 14, 3)
    assert report["counts"]["questions_evaluated"] == 2
    assert report["counts"]["empty_turns_left_out"] == 2
    answers = report["questions"]
    assert [a["qid"] for a in answers] == ["q-move", "q-cat"]
    for a in answers:
        # Each route timed on both passes (the other order the second time).
        assert a["context_ms"] > 0 and a["search_ms"] > 0
        assert a["context_ms_again"] > 0 and a["search_ms_again"] > 0
        assert a["empty"] == (a["items"] == 0)
        assert not (a["evidence"] and a["empty"])
    assert report["overall"]["empty_blocks"] == sum(a["empty"] for a in answers)
    for route in ("context", "search"):
        times = [t for a in answers for t in (a[f"{route}_ms"], a[f"{route}_ms_again"])]
        assert report["latency"][route]["mean_ms"] == pytest.approx(
            sum(times) / len(times), abs=0.01)
        assert report["latency"][route]["p95_ms"] > 0


def test_chat_protocol_refuses_madial(tmp_path: Path) -> None:
    done = run_eval(["madial", "--memory", str(tmp_path / "m.json"), "--dialogue",
                     str(tmp_path / "d.json"), "--protocol", "chat"])
    assert done.returncode == 1
    assert "--protocol chat takes locomo or longmemeval" in done.stdout


def test_a_block_item_from_an_evidence_turn_counts(api: httpx.Client, user: str) -> None:
    """The evidence check against the real gateway: the message's own metadata reaches the
    block's memory (through `sources`, else the memory's metadata)."""
    turns = (ds.ChatTurn("D1:1", "user", "I adopted a grey cat named Luna last Tuesday.",
                         ds.parse_session_date("1:56 pm on 8 May, 2023")),)
    post = chat.ChatPost("eval-chat-test-" + user, "session-1", turns)
    body = {**chat.post_body(user, post, "dia_id"), "extract": "raw"}
    accepted = api.post("/v1/interactions", json=body)
    assert accepted.status_code == 202, accepted.text
    wait_job(api, accepted.json()["job_id"])
    question = ds.Question("q0", user, "I adopted a grey cat named Luna last Tuesday.",
                           "single-hop", ("D1:1",))
    answer = chat.ask(api, question, "dia_id", context_first=True)
    assert answer.evidence and answer.search_evidence and not answer.empty
    assert answer.tokens > 0 and answer.items >= 1
    other = chat.ask(api, ds.Question("q1", user, question.query, "single-hop", ("D9:9",)),
                     "dia_id", context_first=False)
    assert not other.evidence and not other.search_evidence

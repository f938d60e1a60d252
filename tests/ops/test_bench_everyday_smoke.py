"""`python -m ops.bench.everyday` on a probe of two users and one statement each: the real
embedded stack, the default extraction, `/v1/context` asked in both languages (the figures
are the probe's business; here, that each question was asked and counted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = {"users": {
    "u-en": [{"id": "e1", "say": "We adopted a cat named Luna two weeks ago.",
              "reply": "Luna is a lovely name.", "en": "What is my cat called?",
              "zh": "我的猫叫什么名字?"},
             {"say": "How do I convert Celsius to Fahrenheit?", "reply": "Times 9/5, plus 32."}],
    "u-zh": [{"id": "z1", "say": "我老婆下个月生日,她喜欢郁金香", "reply": "可以订一束郁金香。",
              "en": "What flowers does my wife like?", "zh": "我老婆喜欢什么花?"}],
}}


def test_everyday_probe_asks_each_statement_in_both_languages(tmp_path: Path) -> None:
    data, out = tmp_path / "probe.json", tmp_path / "everyday.json"
    data.write_text(json.dumps(PROBE, ensure_ascii=False), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    proc = subprocess.run(
        [sys.executable, "-m", "ops.bench.everyday", "--data", str(data), "--out", str(out),
         "--work-dir", str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=240)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(out.read_text(encoding="utf-8"))
    asked = {(q["id"], q["said"], q["asked"]) for q in report["questions"]}
    assert asked == {("e1", "en", "en"), ("e1", "en", "zh"), ("z1", "zh", "en"),
                     ("z1", "zh", "zh")}
    rows = {r["pair"]: r for r in report["rows"]}
    assert set(rows) == {"en -> en", "en -> zh", "zh -> en", "zh -> zh", "all"}
    assert rows["all"]["questions"] == 4
    share = sum(q["in_block"] for q in report["questions"]) / 4
    assert rows["all"]["in_block"] == round(share, 3)
    # A block that holds the statement is not empty; the search saw the user's memories.
    for q in report["questions"]:
        assert not (q["in_block"] and q["empty"])
        assert q["top_score"] is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["everyday.json", "probe.json"]


def test_everyday_probe_refuses_a_missing_file(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "ops.bench.everyday", "--data",
                           str(tmp_path / "nope.json")], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "--data" in proc.stderr


def test_everyday_probe_names_what_a_malformed_probe_lacks(tmp_path: Path) -> None:
    """Refused before any stack starts, the flag and the bad entry named."""
    one_user = {"users": {"u": [{"say": "hi", "reply": "hello"}]}}
    no_question = {"users": {**PROBE["users"], "u-zh": [{"id": "z1", "say": "x", "reply": "y",
                                                         "en": "q?"}]}}
    for body, named in (("{not json", "not a probe file"), (json.dumps(one_user), "two user"),
                        (json.dumps(no_question), "users.u-zh[0] needs non-empty say, "
                                                  "reply, en, zh")):
        data = tmp_path / "probe.json"
        data.write_text(body, encoding="utf-8")
        proc = subprocess.run([sys.executable, "-m", "ops.bench.everyday", "--data", str(data)],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert "--data" in proc.stderr and named in proc.stderr, proc.stderr

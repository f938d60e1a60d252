"""`python -m ops.bench.gate` reads the gate's curve off a chat report's scores."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ops.bench.gate import auc, study

ROOT = Path(__file__).resolve().parents[2]


def test_auc_counts_pairs_and_ties() -> None:
    assert auc([0.9, 0.8], [0.1, 0.2]) == 1.0
    assert auc([0.1], [0.9]) == 0.0
    assert auc([0.5], [0.5]) == 0.5
    assert auc([0.9, 0.3], [0.5, 0.1]) == 0.75


def _report() -> dict[str, object]:
    rows = [(True, 0.9, 0.2), (True, 0.47, 0.6), (False, 0.3, 0.45), (True, 0.6, None)]
    return {"questions": [
        {"evidence": ev, "top_score": own, "other_top_score": other, "other_empty": other is None
         or other < 0.44} for ev, own, other in rows]}


def test_a_higher_gate_trades_evidence_for_empty_blocks() -> None:
    result = study(_report(), [0.3, 0.44, 0.5, 0.65])
    by_gate = {row["gate"]: row for row in result["gates"]}
    assert 0.3 not in by_gate  # below the gate the report ran with: not knowable
    assert by_gate[0.44]["evidence_in_block"] == 0.75
    assert by_gate[0.5]["evidence_in_block"] == 0.5
    assert by_gate[0.65]["evidence_in_block"] == 0.25
    assert by_gate[0.44]["other_user_empty"] == 0.5
    assert by_gate[0.65]["other_user_empty"] == 1.0


def test_the_command_prints_the_table_and_refuses_an_old_report(tmp_path: Path) -> None:
    good, old = tmp_path / "chat.json", tmp_path / "old.json"
    good.write_text(json.dumps(_report()))
    old.write_text(json.dumps({"questions": [{"evidence": True}]}))
    run = [sys.executable, "-m", "ops.bench.gate"]
    shown = subprocess.run([*run, str(good)], cwd=ROOT, capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert "| 0.5 | 0.5 |" in shown.stdout and "AUC" in shown.stdout
    refused = subprocess.run([*run, str(old)], cwd=ROOT, capture_output=True, text=True)
    assert refused.returncode == 2 and "top_score" in refused.stderr


def test_gates_that_are_not_scores_are_refused_by_name(tmp_path: Path) -> None:
    report = tmp_path / "chat.json"
    report.write_text(json.dumps(_report()))
    run = [sys.executable, "-m", "ops.bench.gate", str(report), "--gates"]
    for gates, said in (("0.5,high", "not a list of numbers: '0.5,high'"),
                        ("0.5,2", "gates are scores between 0 and 1"), (",", "between 0 and 1")):
        refused = subprocess.run([*run, gates], cwd=ROOT, capture_output=True, text=True)
        assert refused.returncode == 2, refused.stdout
        assert "--gates" in refused.stderr and said in refused.stderr
        assert "Traceback" not in refused.stderr

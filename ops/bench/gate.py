"""The context block's gate, studied from a chat-protocol report (decision 0027).

    python -m ops.bench.gate bench-results/eval-chat-locomo-<time>.json [--gates 0.44,0.5]

`memoryd eval … --protocol chat --calibration` records, per question, the best search
score of the user who has the question's memories (`top_score`) and of another user of the
set, who has none (`other_top_score`). The block opens when the best hit reaches the gate
(`memoryd.memories.context.OPENS`; a user with fewer than `FEW` memories always gets it),
so from those two scores alone this prints:

- the AUC of the best hit's score as a test of "this user has the evidence" (the chance that
  a question's own best outscores the other user's best);
- per gate at or above the one the report ran with: the share of questions whose evidence
  would still reach the block (those that reached it and whose best hit clears the gate)
  and the share of other-user questions left with an empty block. A gate below the report's
  cannot be read off: which blocks it would fill with evidence the report does not know.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memoryd.memories.context import OPENS


def auc(positives: Sequence[float], negatives: Sequence[float]) -> float:
    """P(a positive outscores a negative), ties counting half (Mann-Whitney)."""
    if not positives or not negatives:
        return float("nan")
    ranked = sorted([(s, 1) for s in positives] + [(s, 0) for s in negatives])
    rank_sum, i = 0.0, 0
    while i < len(ranked):
        j = i
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            j += 1
        mean_rank = (i + j + 1) / 2  # ranks i+1 .. j
        rank_sum += mean_rank * sum(label for _, label in ranked[i:j])
        i = j
    n_pos, n_neg = len(positives), len(negatives)
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def study(report: dict[str, Any], gates: Sequence[float]) -> dict[str, Any]:
    questions = report["questions"]
    if not any("top_score" in q for q in questions):
        raise ValueError("the report has no top_score per question: run memoryd eval "
                         "--protocol chat with this version")
    own = [q["top_score"] or 0.0 for q in questions]
    other = [q.get("other_top_score") or 0.0 for q in questions
             if q.get("other_empty") is not None]
    rows = []
    for gate in sorted(g for g in gates if g >= OPENS):
        evidence = sum(1 for q in questions if q["evidence"] and (q["top_score"] or 0) >= gate)
        empty = sum(1 for s in other if s < gate)
        rows.append({"gate": gate, "evidence_in_block": round(evidence / len(questions), 3),
                     "other_user_empty": round(empty / len(other), 3) if other else None})
    return {"questions": len(questions), "auc_best_score": round(auc(own, other), 3),
            "ran_with": OPENS, "gates": rows}


def _gates(text: str) -> list[float]:
    """`--gates`: scores between 0 and 1, comma-separated (argparse reports the rest)."""
    try:
        gates = [float(g) for g in text.split(",") if g.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if not gates or not all(0 <= g <= 1 for g in gates):
        raise argparse.ArgumentTypeError(f"gates are scores between 0 and 1: {text!r}")
    return gates


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.bench.gate",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("report", type=Path, help="a chat-protocol report with --calibration")
    parser.add_argument("--gates", type=_gates, default="0.44,0.46,0.48,0.5,0.52,0.55",
                        help="comma-separated gates (those below the report's are skipped)")
    args = parser.parse_args(argv)
    gates: list[float] = args.gates
    try:
        result = study(json.loads(args.report.read_text(encoding="utf-8")), gates)
    except (OSError, ValueError, KeyError) as exc:
        print(f"{args.report}: {exc}", file=sys.stderr)
        return 2
    print(f"{result['questions']} questions; AUC of the best hit's score (own vs another "
          f"user's best): {result['auc_best_score']}; the report ran with gate "
          f"{result['ran_with']}")
    print("| gate | evidence in block | other user: empty block |")
    print("|---|---|---|")
    for row in result["gates"]:
        print(f"| {row['gate']:g} | {row['evidence_in_block']} | {row['other_user_empty']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

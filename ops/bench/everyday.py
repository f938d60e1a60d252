"""A bilingual probe of everyday chat: does what a user said reach the context block, asked
in the language it was said in and in the other one?

    python -m ops.bench.everyday [--data ops/bench/data/everyday/probe.json] [--out FILE]

The real embedded stack (`memoryd up`). Each user of the probe posts its turns as a chat
server does: one interaction per user message with the assistant's reply, no `extract` field
(the default extraction), each message's probe id in its metadata. Then every statement is
asked about in English and in Chinese through `/v1/context` at its defaults, of its own user
and of the other user (who never said it). A question counts when an item of its user's block
holds a memory whose `sources` reach the statement's message (as `memoryd eval --protocol
chat` counts). The figures, by the statement's language and the question's: the share of
questions with the statement in the block, empty blocks, and the other user's empty blocks.

The probe is memoryd's own (written for it, never used to fit a setting), small and
everyday: a check that English and Chinese meet on the answer path, not a benchmark.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from memoryd.evaluation.chat import evidence_keys
from memoryd.platform.host import machine_info
from memoryd.platform.script_share import cjk_share
from ops.bench.common import drop_memoryd_environment
from ops.bench.report import write_report
from ops.stack import ROOT, Stack, log

DEFAULT_DATA = ROOT / "ops" / "bench" / "data" / "everyday" / "probe.json"
DEFAULT_OUT = ROOT / "bench-results" / "everyday.json"
KEY = "probe"
JOB_TIMEOUT_S = 120.0


def language(text: str) -> str:
    return "zh" if cjk_share(text) >= 0.3 else "en"


def post_user(api: httpx.Client, user: str, turns: Sequence[dict[str, Any]]) -> None:
    """The user's turns in order, a day apart, each job awaited before the next post."""
    start = datetime(2026, 1, 5, 9, tzinfo=UTC)
    for n, turn in enumerate(turns):
        at = (start + timedelta(days=n)).isoformat()
        key = turn.get("id", f"{user}-chat-{n}")
        body = {"user_id": user, "thread_id": f"{user}-chat", "messages": [
            {"role": "user", "content": turn["say"], "created_at": at, "metadata": {KEY: key}},
            {"role": "assistant", "content": turn["reply"], "created_at": at,
             "metadata": {KEY: f"{key}-reply"}}]}
        accepted = api.post("/v1/interactions", json=body)
        accepted.raise_for_status()
        job_id = accepted.json()["job_id"]
        deadline = time.monotonic() + JOB_TIMEOUT_S
        while (status := api.get(f"/v1/jobs/{job_id}").json()["status"]) != "succeeded":
            if status == "failed" or time.monotonic() > deadline:
                raise SystemExit(f"job {job_id} of {user} ended {status}")
            time.sleep(0.05)


def block_holds(api: httpx.Client, user: str, query: str, statement: str
                ) -> tuple[bool, bool, float | None, bool]:
    """(the block holds the statement, the block is empty, the best search hit's score,
    that hit reaches the statement): the search figures show what the block's gate read."""
    body = {"user_id": user, "query": query}
    response = api.post("/v1/context", json=body)
    response.raise_for_status()
    items = response.json().get("items") or []
    found = api.post("/v1/search", json=body)
    found.raise_for_status()
    hits = found.json().get("results") or []
    best = hits[0] if hits else None
    return (any(statement in evidence_keys(i["memory"], KEY) for i in items), not items,
            round(float(best["score"]), 4) if best else None,
            best is not None and statement in evidence_keys(best["memory"], KEY))


def ask_all(api: httpx.Client, users: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    names = list(users)
    rows = []
    for user, turns in users.items():
        other = names[(names.index(user) + 1) % len(names)]
        for turn in turns:
            if "id" not in turn:
                continue
            for asked in ("en", "zh"):
                found, empty, top, top_right = block_holds(api, user, turn[asked], turn["id"])
                _, other_empty, other_top, _ = block_holds(api, other, turn[asked], turn["id"])
                rows.append({"id": turn["id"], "said": language(turn["say"]), "asked": asked,
                             "question": turn[asked], "in_block": found, "empty": empty,
                             "top_score": top, "top_is_statement": top_right,
                             "other_empty": other_empty, "other_top_score": other_top})
    return rows


def summary(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Figures per (said, asked) pair, then all together."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(f"{row['said']} -> {row['asked']}", []).append(row)
    groups["all"] = list(rows)
    return [{"pair": pair, "questions": len(g),
             "in_block": round(sum(r["in_block"] for r in g) / len(g), 3),
             "empty_blocks": sum(r["empty"] for r in g),
             "top_is_statement": round(sum(r["top_is_statement"] for r in g) / len(g), 3),
             "other_empty": round(sum(r["other_empty"] for r in g) / len(g), 3)}
            for pair, g in sorted(groups.items(), key=lambda kv: (kv[0] == "all", kv[0]))]


def load_probe(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The probe's users and turns, or ValueError naming what is wrong: at least two users
    (a statement is also asked of the other), each turn a `say` and a `reply`, a statement
    (a turn with an `id`) also its `en` and `zh` questions."""
    try:
        users = json.loads(path.read_text(encoding="utf-8"))["users"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"not a probe file ({type(exc).__name__}: {exc})") from None
    if not isinstance(users, dict) or len(users) < 2:
        raise ValueError("'users' must map at least two user ids to their turns")
    for user, turns in users.items():
        for n, turn in enumerate(turns if isinstance(turns, list) else [None]):
            wanted = ("say", "reply", *(("en", "zh") if isinstance(turn, dict)
                                        and "id" in turn else ()))
            if not isinstance(turn, dict) or not all(
                    isinstance(turn.get(k), str) and turn[k].strip() for k in wanted):
                raise ValueError(f"users.{user}[{n}] needs non-empty {', '.join(wanted)}")
    return users


def run(args: argparse.Namespace) -> dict[str, Any]:
    users = args.users
    work = Path(tempfile.mkdtemp(prefix="bench-everyday-", dir=args.work_dir))
    try:
        env = {"MEMORYD_RATE_LIMIT_PER_S": "0"}
        with Stack("everyday", work / "data", work, args.embedder, extra_env=env) as stack, \
                stack.client() as api:
            for user, turns in users.items():
                post_user(api, user, turns)
            rows = ask_all(api, users)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"data": str(args.data), "embedder": args.embedder, "rows": summary(rows),
            "questions": rows, "machine": machine_info(),
            "date": datetime.now(UTC).isoformat(timespec="seconds")}


def print_report(report: dict[str, Any]) -> None:
    print(f"{'said -> asked':<14} {'questions':>9} {'in block':>9} {'empty':>6} "
          f"{'search top 1':>13} {'other empty':>12}")
    for r in report["rows"]:
        print(f"{r['pair']:<14} {r['questions']:>9} {r['in_block']:>9.3f} "
              f"{r['empty_blocks']:>6} {r['top_is_statement']:>13.3f} {r['other_empty']:>12.3f}")
    for q in report["questions"]:
        if not q["in_block"]:
            print(f"  missed: {q['id']} ({q['said']} -> {q['asked']}, best hit "
                  f"{q['top_score']}, it is the statement: {q['top_is_statement']}) "
                  f"{q['question']}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.bench.everyday",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the probe's JSON")
    parser.add_argument("--embedder", default="e5-small")
    parser.add_argument("--work-dir", type=Path, default=None, help="parent of the temp dir")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON report path")
    args = parser.parse_args(argv)
    try:
        args.users = load_probe(args.data)
    except ValueError as exc:
        parser.error(f"--data {args.data}: {exc}")
    drop_memoryd_environment()
    report = run(args)
    print_report(report)
    write_report(args.out, report)
    log(f"report: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

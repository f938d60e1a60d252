"""The chat-completions proxy's overhead: the same requests sent to a fake upstream directly
and through memoryd, with memories present for the user.

    python -m ops.bench.proxy                      # 300 requests per way, 20 memories
    python -m ops.bench.proxy --requests 50 --out /tmp/proxy.json

A fresh `memoryd up` gets `MEMORYD_PROXY_UPSTREAM_URL` pointing at a local fake
OpenAI-compatible server (`shared/testing/fake_llm.py`, answering at once) and
`--memories` saves for one user. Then each round sends one request directly to the fake
and the same request through the proxy (`X-Memoryd-User`, so the memory context is looked
up and inserted, and the turn enqueued after the answer), streamed and not, alternating so
the host's drift falls on both. Every request is a new conversation (an earlier turn
numbers it), so each turn is enqueued and stored, never an idempotent repeat. Its latest
user message is one of ten questions, worded anew each round by default (`--questions
new`: the query is embedded on every request, as in a live chat); `--questions repeat`
sends them verbatim, so after the first round the query's embedding comes from the
gateway's query cache, as for a user asking again. Timed from the client:
to the first content token of a stream, and to the last byte. The overhead is proxied
minus direct; the goal is its p50 at most 15 ms. The context lookup's own time (the
gateway's `Server-Timing`) is reported beside it: on a busy host the query embedding
dominates. Prints a table and writes a JSON report (`--out`).
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from memoryd.platform.host import machine_info
from memoryd.testing.fake_llm import FakeLLM, streamed
from ops.bench.common import FACTS, QUESTIONS, drop_memoryd_environment, latency_summary
from ops.bench.report import write_report
from ops.stack import ROOT, Stack, log

GOAL_P50_MS = 15.0
USER = "proxy-bench-user"
ANSWER = [f"token{i} " for i in range(20)]  # the fake's answer, one delta per token
KINDS = ("first token (stream)", "total (stream)", "total (no stream)")
# direct: to the fake; proxied: through memoryd for the user (lookup, insert, store);
# forwarded: through memoryd without a user (no memory work: the forwarding alone).
WAYS = ("direct", "proxied", "forwarded")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m ops.bench.proxy",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300,
                        help="timed requests per way (direct, proxied) and per kind")
    parser.add_argument("--warmup", type=int, default=20, help="untimed requests first")
    parser.add_argument("--memories", type=int, default=20, help="saved for the user")
    parser.add_argument("--embedder", default="e5-small")
    parser.add_argument("--questions", choices=("new", "repeat"), default="new",
                        help="word each round's question anew (embedded every time), or "
                             "repeat ten questions verbatim (embeddings from the query cache)")
    parser.add_argument("--work-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "proxy.json",
                        help="where the JSON report goes")
    args = parser.parse_args(argv)
    if args.requests < 1 or args.memories < 0 or args.warmup < 0:
        parser.error("--requests must be at least 1, --memories and --warmup at least 0")
    return args


def _body(i: int, stream: bool, new_question: bool) -> dict[str, Any]:
    question = QUESTIONS[i % len(QUESTIONS)]
    if new_question:  # another text each round and each way: never in the query cache
        question = f"{question} (I asked on day {i}{' in a stream' * stream})"
    return {"model": "fake", "stream": stream, "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "assistant", "content": f"Hello! This is conversation {i}{'s' * stream}."},
        {"role": "user", "content": question}]}


def timed(client: httpx.Client, url: str, body: dict[str, Any],
          headers: dict[str, str]) -> tuple[float | None, float, str, float | None]:
    """(seconds to the first content delta of a stream, to the last byte, X-Memoryd-Memory,
    the context lookup's milliseconds from Server-Timing)."""
    start = time.perf_counter()
    first: float | None = None
    with client.stream("POST", url, json=body, headers=headers) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{url} answered {response.status_code}: {response.read()!r}")
        if body["stream"]:
            for line in response.iter_lines():
                if first is None and line.startswith("data: {") and '"content":"token' in \
                        line.replace(" ", ""):
                    first = time.perf_counter() - start
        else:
            response.read()
        total = time.perf_counter() - start
        timing = response.headers.get("Server-Timing", "")
        found = re.search(r"memoryd-context;dur=([\d.]+)", timing)
        lookup = float(found.group(1)) if found else None
        return first, total, response.headers.get("X-Memoryd-Memory", ""), lookup


def run(args: argparse.Namespace, stack: Stack, fake: FakeLLM) -> dict[str, Any]:
    direct_url = f"{fake.openai_url}/chat/completions"
    proxy_url = f"{stack.base_url}/v1/chat/completions"
    auth = {"Authorization": f"Bearer {stack.api_key}"}
    proxied_headers = {**auth, "X-Memoryd-User": USER}
    samples: dict[str, dict[str, list[float]]] = {w: {k: [] for k in KINDS} for w in WAYS}
    memory_headers: dict[str, int] = {}
    lookups_ms: list[float] = []
    with stack.client() as api:
        log(f"saving {args.memories} memories for {USER}")
        for i in range(args.memories):
            saved = api.post("/v1/memories", params={"wait": 20}, json={
                "user_id": USER, "content": f"{FACTS[i % len(FACTS)]} (note {i})"})
            if saved.status_code not in (200, 201):
                raise RuntimeError(f"save answered {saved.status_code}: {saved.text}")
    load_before = os.getloadavg()
    new_q = args.questions == "new"
    with httpx.Client(timeout=60, trust_env=False) as client:
        for i in range(args.warmup + args.requests):
            keep = i >= args.warmup
            for stream in (True, False):
                for way, url, headers in (("direct", direct_url, auth),
                                          ("proxied", proxy_url, proxied_headers),
                                          ("forwarded", proxy_url, auth)):
                    body = _body(i, stream, new_q)
                    first, total, memory, lookup = timed(client, url, body, headers)
                    if not keep:
                        continue
                    kinds = samples[way]
                    if stream:
                        if first is None:
                            raise RuntimeError(f"{way}: a stream without a content delta")
                        kinds["first token (stream)"].append(first)
                        kinds["total (stream)"].append(total)
                    else:
                        kinds["total (no stream)"].append(total)
                    if way == "proxied":
                        memory_headers[memory] = memory_headers.get(memory, 0) + 1
                        if lookup is not None:
                            lookups_ms.append(lookup / 1000)
            if keep and (i - args.warmup + 1) % 50 == 0:
                log(f"{i - args.warmup + 1}/{args.requests} rounds")
    rows: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        direct = latency_summary(samples["direct"][kind])
        proxied = latency_summary(samples["proxied"][kind])
        forwarded = latency_summary(samples["forwarded"][kind])
        overhead = latency_summary([p - d for p, d in zip(samples["proxied"][kind],
                                                          samples["direct"][kind], strict=True)])
        rows[kind] = {"direct": direct, "proxied": proxied, "forwarded": forwarded,
                      "paired_overhead": overhead,
                      "overhead_p50_ms": round(proxied["p50_ms"] - direct["p50_ms"], 3),
                      "overhead_p99_ms": round(proxied["p99_ms"] - direct["p99_ms"], 3),
                      "forwarding_p50_ms": round(forwarded["p50_ms"] - direct["p50_ms"], 3)}
    worst_p50 = max(float(r["overhead_p50_ms"]) for r in rows.values())
    return {
        "requests": args.requests, "warmup": args.warmup, "memories": args.memories,
        "embedder": args.embedder, "questions": args.questions, "answer_deltas": len(ANSWER),
        "upstream_requests": len(fake.requests), "memory_header": memory_headers,
        "kinds": rows,
        "context_lookup": latency_summary(lookups_ms) if lookups_ms else None,
        "goal_p50_ms": GOAL_P50_MS, "worst_overhead_p50_ms": worst_p50,
        "goal_met": worst_p50 <= GOAL_P50_MS, "machine": machine_info(),
        # The host's 1-minute load average before and after the timed requests: on a shared
        # machine, how much of the CPU others took.
        "load_average": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def render(report: dict[str, Any]) -> list[str]:
    """The printed table, one line per measure."""
    lines = [f"{'measure':<24} {'direct p50':>11} {'p99':>9} {'proxied p50':>12} {'p99':>9} "
             f"{'overhead p50':>13} {'p99':>9} {'no-user p50':>12}"]
    for kind, row in report["kinds"].items():
        d, p, f = row["direct"], row["proxied"], row["forwarded"]
        lines.append(f"{kind:<24} {d['p50_ms']:>8.2f} ms {d['p99_ms']:>6.2f} ms "
                     f"{p['p50_ms']:>9.2f} ms {p['p99_ms']:>6.2f} ms "
                     f"{row['overhead_p50_ms']:>10.2f} ms {row['overhead_p99_ms']:>6.2f} ms "
                     f"{f['p50_ms']:>9.2f} ms")
    lookup = report.get("context_lookup")
    if lookup:
        lines.append(f"{'context lookup (gateway)':<24} {'':>11} {'':>9} "
                     f"{lookup['p50_ms']:>9.2f} ms {lookup['p99_ms']:>6.2f} ms")
    verdict = "met" if report["goal_met"] else "NOT met"
    lines.append(f"worst overhead p50: {report['worst_overhead_p50_ms']:.2f} ms (goal <= "
                 f"{report['goal_p50_ms']:g} ms: {verdict}); {report['memories']} memories, "
                 f"{report.get('questions', 'repeat')} questions, "
                 f"X-Memoryd-Memory: {report['memory_header']}; host load average "
                 f"{report['load_average'][0]:g} before, {report['load_average'][1]:g} after")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    drop_memoryd_environment()
    with tempfile.TemporaryDirectory(prefix="memoryd-bench-proxy-") as tmp:
        work = args.work_dir or Path(tmp)
        with FakeLLM() as fake:
            fake.responder = lambda _request: streamed(ANSWER)
            env = {"MEMORYD_PROXY_UPSTREAM_URL": fake.openai_url}
            with Stack("proxy", work / "data", work, args.embedder, extra_env=env) as stack:
                report = run(args, stack, fake)
    report["command"] = ["python", "-m", "ops.bench.proxy", "--requests", str(args.requests),
                         "--memories", str(args.memories), "--questions", args.questions]
    for line in render(report):
        print(line)
    write_report(args.out, report)
    log(f"report: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

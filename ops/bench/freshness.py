"""Enqueue-to-searchable latency, raw and rules extraction, and one read-your-writes search.

    python -m ops.bench.freshness                   # 50 writes per mode and measure
    python -m ops.bench.freshness --n 200 --modes rules --out /tmp/freshness.json

The real embedded stack (`memoryd up`, its own Redis, `--embedder`). For each extraction
mode, `--n` times, one at a time:

1. **polled**: `POST /v1/interactions` with a message holding a unique token, then
   `POST /v1/search` for that token every `--poll-ms` until a result holds it; timed from
   before the POST to the answer that found it (what a client that polls sees);
2. **fresh**: the same write, then one `POST /v1/search` with `consistency: "fresh"`, timed
   alone (the read-your-writes search, its wait included) and from before the POST; the
   report counts how many of those searches found the token and said `applied`.

Each phase writes for a user of its own, so a fresh search waits only for its own write.
Prints a table and writes a JSON report (`--out`) that `python -m ops.bench.docs` renders.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from memoryd.platform.host import machine_info
from ops.bench.common import drop_memoryd_environment, latency_summary
from ops.bench.report import write_report
from ops.stack import ROOT, Stack, log

DEFAULT_OUT = ROOT / "bench-results" / "freshness.json"
MODES = ("raw", "rules")
FRESH_TIMEOUT_S = 30.0
SENTENCES = [
    "Remember that I moved to Berlin and my locker code is {tag}",
    "I work at the bakery on {tag} street",
    "My daughter's violin teacher is called {tag}",
    "I prefer the window seat, my frequent flyer number is {tag}",
]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m ops.bench.freshness", description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=50, help="timed writes per mode and phase")
    parser.add_argument("--modes", default=",".join(MODES), help="extraction modes: raw,rules")
    parser.add_argument("--poll-ms", type=float, default=5.0,
                        help="pause between the polled phase's searches")
    parser.add_argument("--found-timeout-s", type=float, default=30.0,
                        help="the polled phase gives a write up after this long")
    parser.add_argument("--embedder", default="e5-small")
    parser.add_argument("--work-dir", type=Path, default=None, help="parent of the temp dir")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON report path")
    args = parser.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not args.modes or any(m not in MODES for m in args.modes):
        parser.error(f"--modes: a comma-separated subset of {','.join(MODES)}")
    if args.n < 1 or args.poll_ms < 0 or args.found_timeout_s <= 0:
        parser.error("--n must be at least 1, --poll-ms at least 0, --found-timeout-s above 0")
    return args


def write(api: httpx.Client, user: str, mode: str, i: int) -> tuple[str, str]:
    """One interaction holding a fresh token; (token, job id). The token ends in digits:
    texts that state different numbers are never deduplicated into one memory."""
    # Letters, then four digits: a longer run of digits could pass for a phone number and be
    # redacted away.
    letters = "".join(chr(ord("a") + int(c, 16)) for c in uuid.uuid4().hex[:8])
    tag = f"zq{letters}{i % 1000 + 1000}"
    response = api.post("/v1/interactions", json={
        "user_id": user, "extract": mode,
        "messages": [{"role": "user", "content": SENTENCES[i % len(SENTENCES)].format(tag=tag)}],
    })
    if response.status_code != 202:
        raise RuntimeError(f"interaction answered {response.status_code}: {response.text}")
    return tag, str(response.json()["job_id"])


def search(api: httpx.Client, user: str, tag: str, **fields: Any) -> dict[str, Any]:
    response = api.post("/v1/search", json={"user_id": user, "query": tag, "top_k": 5,
                                            **fields})
    if response.status_code != 200:
        raise RuntimeError(f"search answered {response.status_code}: {response.text}")
    body: dict[str, Any] = response.json()
    return body


def holds(body: dict[str, Any], tag: str) -> bool:
    return any(tag in hit["memory"]["content"] for hit in body["results"])


def polled(api: httpx.Client, user: str, mode: str, i: int, args: argparse.Namespace) -> float:
    """Seconds from before the write to the first search that finds it."""
    started = time.perf_counter()
    tag, job = write(api, user, mode, i)
    while not holds(search(api, user, tag), tag):
        if time.perf_counter() - started > args.found_timeout_s:
            view = api.get(f"/v1/jobs/{job}").json()
            raise RuntimeError(f"{mode} write {job} ({tag!r}) not searchable in "
                               f"{args.found_timeout_s} s; the job: {view}")
        time.sleep(args.poll_ms / 1000.0)
    return time.perf_counter() - started


def job_seconds(api: httpx.Client, job: str) -> float:
    """The job's own time, accepted to ended, as its record says (both written in the stack)."""
    view = api.get(f"/v1/jobs/{job}").json()
    ended = datetime.fromisoformat(view["updated_at"])
    return (ended - datetime.fromisoformat(view["created_at"])).total_seconds()


def fresh(api: httpx.Client, user: str, mode: str, i: int) -> dict[str, Any]:
    """The fresh search's seconds, seconds from before the write, the wait it reported, the
    job's own time, whether it found the write and said applied."""
    started = time.perf_counter()
    tag, job = write(api, user, mode, i)
    before = time.perf_counter()
    body = search(api, user, tag, consistency="fresh", fresh_timeout_s=FRESH_TIMEOUT_S)
    done = time.perf_counter()
    return {"search": done - before, "total": done - started,
            "waited": body["freshness"]["waited_ms"] / 1000.0, "job": job_seconds(api, job),
            "found": holds(body, tag), "applied": bool(body["freshness"]["applied"])}


def measure(api: httpx.Client, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    run = uuid.uuid4().hex[:8]
    poll_user, fresh_user = f"poll-{mode}-{run}", f"fresh-{mode}-{run}"
    polled(api, poll_user, mode, -1, args)  # warm-up: the first write of a user
    fresh(api, fresh_user, mode, -1)
    log(f"{mode}: {args.n} writes polled until searchable")
    latencies = [polled(api, poll_user, mode, i, args) for i in range(args.n)]
    log(f"{mode}: {args.n} writes each read back by one fresh search")
    runs = [fresh(api, fresh_user, mode, i) for i in range(args.n)]
    return {"polled": latency_summary(latencies),
            "fresh_search": latency_summary([r["search"] for r in runs]),
            "fresh_write_to_answer": latency_summary([r["total"] for r in runs]),
            "fresh_waited": latency_summary([r["waited"] for r in runs]),
            "fresh_job": latency_summary([r["job"] for r in runs]),
            "fresh_found": sum(r["found"] for r in runs),
            "fresh_applied": sum(r["applied"] for r in runs)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="bench-freshness-", dir=args.work_dir))
    try:
        env = {"MEMORYD_RATE_LIMIT_PER_S": "0"}
        with Stack("freshness", work / "data", work, args.embedder, extra_env=env) as stack, \
                stack.client() as api:
            modes = {mode: measure(api, mode, args) for mode in args.modes}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"n": args.n, "poll_ms": args.poll_ms, "embedder": args.embedder,
            "fresh_timeout_s": FRESH_TIMEOUT_S, "modes": modes, "machine": machine_info(),
            "date": datetime.now(UTC).isoformat(timespec="seconds")}


def table(report: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """(mode, measure, p50 ms, p99 ms, max ms) rows, as printed and as docs show them."""
    rows = []
    for mode, m in report["modes"].items():
        for key, label in (("polled", "POST, then search every poll until found"),
                           ("fresh_search", "one consistency=fresh search after the POST"),
                           ("fresh_write_to_answer", "POST + that fresh search"),
                           ("fresh_waited", "its wait, as freshness.waited_ms says"),
                           ("fresh_job", "the awaited job, accepted to ended")):
            if key not in m:
                continue
            s = m[key]
            rows.append((mode, label, f"{s['p50_ms']:.1f}", f"{s['p99_ms']:.1f}",
                         f"{s['max_ms']:.1f}"))
    return rows


def print_report(report: dict[str, Any]) -> None:
    print(f"enqueue-to-searchable, {report['n']} writes per mode and phase, polled every "
          f"{report['poll_ms']:g} ms")
    print(f"{'mode':<6} {'measure':<46} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9}")
    for mode, label, p50, p99, top in table(report):
        print(f"{mode:<6} {label:<46} {p50:>9} {p99:>9} {top:>9}")
    for mode, m in report["modes"].items():
        print(f"{mode}: fresh searches that found the write {m['fresh_found']} of "
              f"{report['n']}, said applied {m['fresh_applied']} of {report['n']}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    drop_memoryd_environment()
    report = run(args)
    print_report(report)
    write_report(args.out, report)
    log(f"report: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

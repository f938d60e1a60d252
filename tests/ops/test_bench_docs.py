"""`python -m ops.bench.docs`: docs/benchmarks.md holds the figures of the JSON reports and no
other. The generator runs as the real command on small reports written here; the page in
the repository is checked against the template and, where the reports are present, against
them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ops.bench.docs import (
    README_BEGIN,
    README_BLOCK,
    README_END,
    chat_block,
    figures,
    generated_blocks,
    render_document,
    render_readme,
    template_part,
)

ROOT = Path(__file__).resolve().parents[2]
MACHINE = {"nproc": 3, "cpu_model": "Fixture CPU", "mem_total_gb": 7.5, "python": "3.11.9",
           "platform": "Linux-fixture"}


def write_reports(results: Path, scale: float) -> None:
    """One report of every kind; every figure in them is multiplied by `scale`, so two
    scales give two pages that differ in every figure."""
    results.mkdir(parents=True, exist_ok=True)

    def save(name: str, data: dict[str, Any]) -> None:
        (results / name).write_text(json.dumps(data), encoding="utf-8")

    save("bench.json", {
        "meta": {"date": "2026-01-02T03:04:05+00:00", "embedder": "e5-small",
                 "e5_engine": "host", "machine": MACHINE,
                 "command": ["python", "-m", "ops.bench", "--phases", "enqueue"]},
        "enqueue": {"requests": 37, "cpu": {"other_cores": 0.0},
                    "latency": {"p50_ms": 1.23 * scale, "p99_ms": 4.56 * scale,
                                "mean_ms": 2.34 * scale}},
    })
    save("hostile.json", {
        "max_message_bytes": 4096, "repeats": 3, "goal_ms": 20.0,
        "goal_passes": ["redaction", "rules", "keyword_vector"], "machine": MACHINE,
        "worst": {"redaction": {"shape": "digit-groups", "cpu_ms": 3.21 * scale},
                  "total": {"shape": "cjk", "cpu_ms": 6.54 * scale}},
    })
    idle = {"n": 40, "p50_ms": 5.11 * scale, "p99_ms": 9.22 * scale, "mean_ms": 6.33 * scale,
            "max_ms": 12.44 * scale}
    loaded = {"n": 40, "p50_ms": 5.55 * scale, "p99_ms": 9.66 * scale, "mean_ms": 6.77 * scale,
              "max_ms": 13.88 * scale}
    save("bench-waits.json", {
        "waits": 8, "wait_s": 30.0, "searches": 40, "memories": 12, "rate": 20.0,
        "idle": idle, "loaded": loaded, "p99_ratio": round(9.66 / 9.22, 3), "goal_ratio": 1.5,
        "waits_pending_after_searches": 8, "rounds": [{}, {}],
    })
    save("fairness.json", {
        "backfill": 300, "turns": 4, "sentences": 12, "saves": 5,
        "idle": {"n": 5, "p50_ms": 30.1 * scale, "mean_ms": 31.2 * scale, "max_ms": 40.3 * scale},
        "under_backfill": {"n": 5, "p50_ms": 50.4 * scale, "mean_ms": 52.5 * scale,
                           "max_ms": 60.6 * scale},
        "ratio_p50": round(50.4 / 30.1, 2), "goal_met": True,
    })
    store = {"requests": 40, "busy_share": round(0.123 * scale, 3), "waited_s": 0.5}
    save("fairness-server.json", {
        "mode": "server", "workers": 2, "backfill": 200, "turns": 4, "sentences": 12,
        "saves": 5, "unmarked": 200, "machine": MACHINE,
        "idle": {"n": 5, "p50_ms": 70.1 * scale, "mean_ms": 71.2 * scale,
                 "max_ms": 80.3 * scale, "store": store},
        "under_backfill": {"n": 5, "p50_ms": 90.4 * scale, "mean_ms": 92.5 * scale,
                           "max_ms": 99.6 * scale, "store": store},
        "behind_unmarked": {"n": 5, "p50_ms": 150.4 * scale, "mean_ms": 152.5 * scale,
                            "max_ms": 190.6 * scale, "unmarked": 200, "store": store},
        "ratio_p50": round(90.4 / 70.1, 2), "goal_met": True,
        "ratio_unmarked_p50": round(150.4 / 70.1, 2), "goal_unmarked_met": False,
    })
    lat = {"n": 7, "p50_ms": 40.5 * scale, "p99_ms": 90.25 * scale, "mean_ms": 50.0 * scale,
           "max_ms": 95.75 * scale}
    save("freshness.json", {
        "n": 7, "poll_ms": 5.0, "embedder": "e5-small", "fresh_timeout_s": 30.0,
        "machine": MACHINE, "date": "2026-01-02T03:04:05+00:00",
        "modes": {mode: {"polled": lat, "fresh_search": lat, "fresh_write_to_answer": lat,
                         "fresh_waited": lat, "fresh_job": lat, "fresh_found": 7,
                         "fresh_applied": 7} for mode in ("raw", "rules")},
    })
    save("everyday.json", {
        "embedder": "e5-small", "machine": MACHINE, "date": "2026-01-02T03:04:05+00:00",
        "rows": [{"pair": "en -> zh", "questions": 10, "in_block": 0.3 * scale,
                  "empty_blocks": 4, "top_is_statement": 0.5, "other_empty": 0.9},
                 {"pair": "all", "questions": 40, "in_block": 0.45 * scale,
                  "empty_blocks": 12, "top_is_statement": 0.775, "other_empty": 0.95}],
    })
    save("eval-locomo-20260102T030405.json", {
        "dataset": "locomo", "embedder": "e5-small", "modes": ["dense", "hybrid"],
        "started_at": "2026-01-02T03:04:05+00:00", "as_of": None,
        "inputs": {"data": "../shared/bench/locomo10.json"},
        "git": {"commit": "0123456789abcdef", "dirty": False},
        "counts": {"questions_left_out_by_limit": 0},
        "results": [
            {"mode": mode, "latency": {"mean_ms": 20.5 * scale * k, "p95_ms": 25.5 * scale * k},
             "overall": {"count": 9, "metrics": {"recall@5": 0.4321 * k / scale,
                                                 "recall@10": 0.5432 * k / scale}},
             "categories": {"multi-hop": {"count": 4, "metrics": {
                 "recall@5": 0.2109 * k / scale, "recall@10": 0.3198 * k / scale}}}}
            for mode, k in (("dense", 1.0), ("hybrid", 1.1))
        ],
    })
    figures_ = {"count": 9, "evidence_in_block": 0.4444 * scale, "empty_blocks": 3,
                "search_evidence": 0.5556, "tokens_mean": 120.4 * scale, "tokens_p95": 300.0}
    save("eval-chat-locomo-20260102T030405.json", {
        "protocol": "chat", "dataset": "locomo", "name": "locomo", "embedder": "e5-small",
        "started_at": "2026-01-02T03:04:05+00:00",
        "inputs": {"data": "../shared/bench/locomo10.json"},
        "git": {"commit": "0123456789abcdef", "dirty": False},
        "counts": {"questions_left_out_by_limit": 0},
        "ingest": {"seconds": 10.0, "turns": 40, "interactions": 21, "memories": 50,
                   "turns_per_s": 4.0 * scale, "memories_per_turn": 1.25},
        "overall": figures_, "categories": {"single-hop": figures_, "temporal": figures_},
        "latency": {"context": {"mean_ms": 30.0, "p95_ms": 45.0 * scale},
                    "search": {"mean_ms": 20.0, "p95_ms": 30.0}},
        "questions": [],
    })


def run_docs(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "ops.bench.docs", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def test_the_page_shows_each_reports_figures_its_command_and_machine(tmp_path: Path) -> None:
    results, page_path = tmp_path / "results", tmp_path / "benchmarks.md"
    write_reports(results, 1.0)
    done = run_docs("--results", str(results), "--out", str(page_path))
    assert done.returncode == 0, done.stderr
    page = page_path.read_text(encoding="utf-8")

    assert "| enqueue: POST /v1/interactions x37, p50 | 1.2 | ms |" in page
    assert "| enqueue: p99 | 4.6 | ms |" in page
    assert "Command: `python -m ops.bench --phases enqueue`" in page
    assert ("Machine: Fixture CPU, nproc 3, 7.5 GB memory, Python 3.11.9, Linux-fixture. "
            "Run 2026-01-02T03:04:05+00:00") in page
    assert "| redaction | digit-groups | 3.2 |" in page and "| total | cjk | 6.5 |" in page
    assert "Command: `python -m ops.bench.hostile --repeats 3 --max-bytes 4096`" in page
    assert "| idle (40 searches) | 5.1 | 9.2 | 6.3 | 12.4 |" in page
    assert "| 8 waits of 30 s pending (40 searches) | 5.5 | 9.7 | 6.8 | 13.9 |" in page
    assert ("Command: `python -m ops.bench.waits --waits 8 --wait-s 30 --searches 40 "
            "--rounds 2 --rate 20 --memories 12`") in page
    assert "| idle | 5 | 30.1 | 31.2 | 40.3 |" in page
    assert "| 300 backfill interactions queued | 5 | 50.4 | 52.5 | 60.6 |" in page
    assert ("Command: `python -m ops.bench.fairness --backfill 300 --turns 4 --sentences 12 "
            "--saves 5`") in page
    assert "| dense | 9 | 0.432 | 0.543 | 20.5 / 25.5 |" in page
    assert "| en -> zh | 10 | 0.300 | 4 | 0.500 | 0.900 |" in page
    assert "Command: `python -m ops.bench.everyday`" in page
    assert "| rules | POST, then search every poll until found | 40.5 | 90.2 | 95.8 |" in page
    assert ("Command: `python -m ops.bench.freshness --n 7 --modes raw,rules "
            "--poll-ms 5`") in page
    assert "| hybrid | multi-hop | 4 | 0.232 | 0.352 |" in page
    assert ("Command: `memoryd eval locomo --data ../shared/bench/locomo10.json "
            "--mode dense,hybrid --embedder e5-small`") in page
    assert "commit 0123456789ab" in page
    blocks = dict(generated_blocks(page))
    for report, lines in {
        "bench-results/fairness-server.json": [
            "Command: `python -m ops.bench.fairness --backfill 200 --turns 4 --sentences 12 "
            "--saves 5 --server 2 --unmarked 200`",
            "Server mode: `memoryd serve`, 2 `memory,llm` worker(s)",
            "| 200 unmarked interactions queued | 5 | 150.4 | 152.5 | 190.6 |",
            "(goal NOT met)",
            "(near 1: it set the pace): idle 0.123, backfill 0.123, unmarked 0.123."],
        "bench-results/eval-chat-locomo-20260102T030405.json": [
            "Command: `memoryd eval locomo --data ../shared/bench/locomo10.json "
            "--protocol chat --embedder e5-small`",
            "| overall | 9 | 0.444 | 3 | 0.556 | 120 / 300 |",
            "| single-hop | 9 | 0.444 |",
            "| 40 | 21 | 4.0 | 50 | 1.250 | 30.0 / 45.0 | 20.0 / 30.0 | 1.50 |"],
    }.items():
        for line in lines:
            assert line in blocks[report], (report, line)
    # The chat report is not read as a ranking report of the same set.
    assert "bench-results/eval-chat-locomo-20260102T030405.json" not in dict(
        generated_blocks(page.split("## The answer path")[0]))
    # A report that does not record its machine is not given one.
    waits = dict(generated_blocks(page))["bench-results/bench-waits.json"]
    assert "Machine: not recorded in the report." in waits

    # Other reports, other page: every figure above came from the JSON.
    write_reports(results, 2.0)
    assert run_docs("--results", str(results), "--out", str(page_path)).returncode == 0
    again = page_path.read_text(encoding="utf-8")
    assert "| enqueue: POST /v1/interactions x37, p50 | 2.5 | ms |" in again
    assert "| redaction | digit-groups | 6.4 |" in again
    assert "| idle (40 searches) | 10.2 | 18.4 | 12.7 | 24.9 |" in again
    assert "| idle | 5 | 60.2 | 62.4 | 80.6 |" in again
    assert "| idle | 5 | 140.2 | 142.4 | 160.6 |" in again
    assert "| dense | 9 | 0.216 | 0.272 | 41.0 / 51.0 |" in again
    assert "| overall | 9 | 0.889 | 3 | 0.556 | 241 / 300 |" in again
    for stale in ("| 1.2 | ms |", "| 3.2 |", "| 30.1 |", "| 0.432 |"):
        assert stale not in again


def test_only_the_reports_put_figures_on_the_page(tmp_path: Path) -> None:
    write_reports(tmp_path / "results", 1.0)
    full = render_document(tmp_path / "results")
    empty = render_document(tmp_path / "none")
    # The template (all but the generated blocks) is the same with or without reports and
    # carries no figure of its own.
    assert template_part(full) == template_part(empty)
    assert figures(template_part(full)) == []
    assert figures(full), "the fixture reports' figures are on the page"
    # Without reports, every block says how to make its report and shows no figure.
    blocks = generated_blocks(empty)
    assert [source for source, _ in blocks] == [
        "bench-results/eval-<dataset>-<time>.json",
        "bench-results/eval-chat-<set>-<time>.json", "bench-results/everyday.json",
        "bench-results/bench.json", "bench-results/bench-long.json",
        "bench-results/bench.json#peer", "bench-results/bench-1m.json",
        "bench-results/hostile.json",
        "bench-results/bench-waits.json", "bench-results/freshness.json",
        "bench-results/fairness.json", "bench-results/fairness-server.json",
        "bench-results/proxy.json"]
    for _, body in blocks:
        assert body.startswith("No report yet: `") and figures(body) == []


def test_check_says_whether_the_page_is_current(tmp_path: Path) -> None:
    results, page_path = tmp_path / "results", tmp_path / "benchmarks.md"
    write_reports(results, 1.0)
    assert run_docs("--results", str(results), "--out", str(page_path)).returncode == 0
    assert run_docs("--results", str(results), "--out", str(page_path),
                    "--check").returncode == 0
    write_reports(results, 3.0)
    stale = run_docs("--results", str(results), "--out", str(page_path), "--check")
    assert stale.returncode == 1 and "python -m ops.bench.docs" in stale.stderr
    assert "| 1.2 | ms |" in page_path.read_text(encoding="utf-8"), "--check writes nothing"


def test_docs_benchmarks_md_holds_no_figure_the_reports_do_not(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    # Outside its generated blocks the page is the generator's template, figure-free.
    assert template_part(page) == template_part(render_document(tmp_path / "none"))
    assert figures(template_part(page)) == []
    # A block whose report is here is what that report gives now. (bench-results/ is not
    # in the repository: a checkout without the reports checks the template alone.)
    fresh = dict(generated_blocks(render_document(ROOT / "bench-results")))
    for source, body in generated_blocks(page):
        if (ROOT / source).is_file():
            assert body == fresh.get(source), f"{source} changed: run python -m ops.bench.docs"


def test_readmes_figures_come_from_the_reports(tmp_path: Path) -> None:
    results, readme = tmp_path / "results", tmp_path / "README.md"
    readme.write_text(f"# x\n\n{README_BEGIN}\nstale\n{README_END}\n\nrest\n", encoding="utf-8")
    write_reports(results, 1.0)
    done = run_docs("--results", str(results), "--out", str(tmp_path / "b.md"),
                    "--readme", str(readme))
    assert done.returncode == 0, done.stderr
    text = readme.read_text(encoding="utf-8")
    assert "| LoCoMo recall@10, hybrid | 0.598 | `memoryd eval locomo` |" in text
    assert "chat protocol" not in text  # README keeps to its size; the page has them
    assert "| enqueue: POST /v1/interactions x37, p50 | 1.2 ms | `python -m ops.bench` |" in text
    assert ("| worst hostile message: redaction + rules + keywords | 6.54 ms CPU | "
            "`python -m ops.bench.hostile` |") in text
    assert "| search p99 with 8 waits pending / idle | 1.048× |" in text
    assert "| save under another tenant's backfill / idle (p50) | 1.67× |" in text
    assert "stale" not in text and text.startswith("# x\n") and text.endswith("\n\nrest\n")
    # Other reports, other figures; the rest of the README is left as it was.
    write_reports(results, 2.0)
    again = render_readme(text, results)
    assert "| enqueue: POST /v1/interactions x37, p50 | 2.5 ms |" in again
    assert "| 1.2 ms |" not in again
    assert README_BLOCK.sub("", again) == README_BLOCK.sub("", text)


def test_a_readme_without_the_figures_markers_is_a_usage_error(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\nno figures here\n", encoding="utf-8")
    done = run_docs("--results", str(tmp_path / "none"), "--out", str(tmp_path / "b.md"),
                    "--readme", str(readme))
    assert done.returncode == 2
    assert "--readme" in done.stderr and "Traceback" not in done.stderr
    assert readme.read_text(encoding="utf-8") == "# x\n\nno figures here\n"
    assert not (tmp_path / "b.md").exists()


def test_the_repositorys_readme_figures_are_the_reports(tmp_path: Path) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert README_BLOCK.search(text), "README keeps its figures block"
    # Outside the block README carries no figure the generator would own; inside, where the
    # reports are here, it is what they give (bench-results/ is not in the repository).
    if (ROOT / "bench-results").is_dir():
        assert text == render_readme(text, ROOT / "bench-results"), (
            "README's figures changed: run python -m ops.bench.docs")
    # Emptied, with no report at hand, the block gets no figure from anywhere else.
    emptied = README_BLOCK.sub(f"{README_BEGIN}\n{README_END}\n", text)
    empty = render_readme(emptied, tmp_path / "none")
    assert figures(README_BLOCK.search(empty).group(0)) == []  # type: ignore[union-attr]
    # With no report at hand, every row stays as README shows it, or goes if a report owns it.
    kept = render_readme(text, tmp_path / "none")
    assert README_BLOCK.sub("", kept) == README_BLOCK.sub("", text)


def test_a_report_not_here_keeps_what_the_page_showed(tmp_path: Path) -> None:
    """Reports are not in the repository: a checkout that reran one benchmark refreshes its
    figures and keeps the others as the page and README showed them."""
    results, page_path = tmp_path / "results", tmp_path / "benchmarks.md"
    write_reports(results, 1.0)
    page = render_document(results)
    readme = render_readme(f"# x\n\n{README_BEGIN}\n{README_END}\n", results)
    (results / "hostile.json").unlink()
    (results / "fairness.json").unlink()
    kept = dict(generated_blocks(render_document(results, page)))
    before = dict(generated_blocks(page))
    assert kept["bench-results/hostile.json"] == before["bench-results/hostile.json"]
    assert kept["bench-results/fairness.json"] == before["bench-results/fairness.json"]
    assert "No report yet" in dict(generated_blocks(render_document(results)))[
        "bench-results/hostile.json"]
    again = render_readme(readme, results)
    assert "| 6.54 ms CPU | `python -m ops.bench.hostile` |" in again
    assert "| 1.67× | `python -m ops.bench.fairness` |" in again
    assert again == readme  # every other figure is the reports' own, unchanged
    page_path.write_text(page, encoding="utf-8")
    done = run_docs("--results", str(results), "--out", str(page_path), "--check")
    assert done.returncode == 0, done.stderr


def test_an_eval_set_not_rerun_keeps_its_block_and_readme_rows(tmp_path: Path) -> None:
    """Rerunning one `memoryd eval` set (here: only a chat run) refreshes that set alone:
    the ranking set and its README row stay as the page showed them."""
    results = tmp_path / "results"
    write_reports(results, 1.0)
    page = render_document(results)
    readme = render_readme(f"# x\n\n{README_BEGIN}\n{README_END}\n", results)
    assert "`memoryd eval locomo`" in readme
    ranking = "bench-results/eval-locomo-20260102T030405.json"
    (results / ranking.removeprefix("bench-results/")).unlink()
    chat = json.loads((results / "eval-chat-locomo-20260102T030405.json").read_text())
    chat.update(name="longmemeval", dataset="longmemeval", started_at="2026-02-01T00:00:00")
    (results / "eval-chat-longmemeval-20260201T000000.json").write_text(json.dumps(chat))
    again = dict(generated_blocks(render_document(results, page)))
    assert again[ranking] == dict(generated_blocks(page))[ranking]
    assert {"bench-results/eval-chat-locomo-20260102T030405.json",
            "bench-results/eval-chat-longmemeval-20260201T000000.json"} <= set(again)
    kept = render_readme(readme, results)
    assert kept == readme


def test_a_rerun_sets_readme_rows_keep_their_place(tmp_path: Path) -> None:
    """A set rerun alone refreshes its README rows where README showed them: the rows of
    sets with no report here do not end up after it."""
    results = tmp_path / "results"
    write_reports(results, 1.0)
    readme = (f"# x\n\n{README_BEGIN}\n| figure | value | reproduce with |\n|---|---|---|\n"
              "| MADial zh recall@5, hybrid | 0.599 | `memoryd eval madial` |\n"
              "| LoCoMo recall@10, hybrid | 0.111 | `memoryd eval locomo` |\n"
              f"{README_END}\n")
    block = README_BLOCK.search(render_readme(readme, results)).group(0)  # type: ignore[union-attr]
    lines = block.splitlines()
    madial = lines.index("| MADial zh recall@5, hybrid | 0.599 | `memoryd eval madial` |")
    locomo = lines.index("| LoCoMo recall@10, hybrid | 0.598 | `memoryd eval locomo` |")
    assert madial < locomo and "0.111" not in block


def test_a_chat_rerun_on_a_kept_store_shows_no_ingest_rate() -> None:
    """Turns reposted to a store that holds them already are no ingest: the page says so
    instead of showing their rate."""
    figures_ = {"count": 2, "evidence_in_block": 0.5, "empty_blocks": 0,
                "search_evidence": 0.5, "tokens_mean": 100.0, "tokens_p95": 120.0}
    report: dict[str, Any] = {
        "protocol": "chat", "dataset": "locomo", "name": "locomo", "embedder": "e5-small",
        "started_at": "2026-01-02T03:04:05+00:00", "inputs": {"data": "locomo10.json"},
        "ingest": {"seconds": 1.0, "turns": 400, "interactions": 200, "memories": 420,
                   "turns_per_s": 400.0, "memories_per_turn": 1.05, "memories_before": 420},
        "overall": figures_, "categories": {},
        "latency": {"context": {"mean_ms": 30.0, "p95_ms": 45.0},
                    "search": {"mean_ms": 20.0, "p95_ms": 30.0}},
    }
    kept = "\n".join(chat_block(report))
    assert "| 400 | 200 | - (store kept) | 420 |" in kept and "400.0" not in kept
    report["ingest"]["memories_before"] = 0
    assert "| 400 | 200 | 400.0 | 420 |" in "\n".join(chat_block(report))

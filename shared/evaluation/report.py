"""What an evaluation run found: the report's shape, its tables, its JSON file."""

from __future__ import annotations

import json
import math
import subprocess
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from memoryd.evaluation.chat import ChatReport
from memoryd.evaluation.metrics import GroupSummary, ScoredQuestion

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class ModeResult:
    mode: str
    overall: GroupSummary
    categories: dict[str, GroupSummary]
    latency: dict[str, float]
    questions: list[ScoredQuestion] = field(default_factory=list)
    rankings: dict[str, list[str]] = field(default_factory=dict)
    calibration: dict[str, float] | None = None  # `memoryd eval --calibration`


@dataclass
class EvalReport:
    dataset: str
    name: str  # the set: the dataset's name, or `--name` (e.g. one language of MADial)
    embedder: str
    modes: list[str]
    top_k: int
    as_of: str | None
    started_at: str
    inputs: dict[str, str]
    git: dict[str, Any]
    settings: dict[str, Any]  # the stack's settings that shape rankings and latency
    counts: dict[str, int]
    ingest: dict[str, float]
    results: list[ModeResult] = field(default_factory=list)
    unresolved_ids: list[str] = field(default_factory=list)
    merged_keys: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    wall_time_s: float = 0.0
    # Where it ran (`memoryd.platform.host.machine_info`): latency and ingest rates are the
    # host's.
    machine: dict[str, Any] = field(default_factory=dict)


def identical_modes(results: list[ModeResult]) -> list[str]:
    """Two modes that rank every question the same way suggest `mode` is not honoured."""
    return [
        f"modes {a.mode} and {b.mode} returned identical rankings for every question"
        for i, a in enumerate(results) for b in results[i + 1:]
        if a.rankings and a.rankings == b.rankings
    ]


def git_state(root: Path = REPO_ROOT) -> dict[str, Any]:
    """The commit evaluated, and whether the tree had changes on top (numbers then say less)."""
    def run(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=True
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip()

    commit = run("rev-parse", "HEAD")
    status = run("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def default_out_path(dataset: str, now: datetime, out: Path | None = None) -> Path:
    """Where a report goes: `out` as given, or, when `out` is missing or is an existing
    directory, `eval-<set>-<time>.json` there (`bench-results/` by default). A directory
    given as `--out` used to fail only once the run was over, when the report was
    written."""
    name = f"eval-{dataset}-{now.strftime('%Y%m%dT%H%M%S')}.json"
    if out is None:
        return Path("bench-results") / name
    if out.is_dir():
        return out / name
    return out


def _json_safe(value: Any) -> Any:
    # NaN (a metric over no question) is not JSON; null says the same honestly.
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def to_json(report: EvalReport | ChatReport) -> dict[str, Any]:
    data: dict[str, Any] = _json_safe(asdict(report))
    return data


def write_json(report: EvalReport | ChatReport, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_json(report), ensure_ascii=False, indent=2) + "\n", "utf-8")
    return path


def _fmt(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.3f}"


def mode_table(report: EvalReport, result: ModeResult) -> Table:
    names = list(result.overall.metrics)
    table = Table(title=f"{report.dataset} · mode={result.mode} · embedder={report.embedder}")
    table.add_column("category")
    table.add_column("n", justify="right")
    for name in names:
        table.add_column(name, justify="right")
    # A dataset without categories (MADial) gets the overall row alone.
    if list(result.categories) != ["all"]:
        for label, group in result.categories.items():
            table.add_row(label, str(group.count), *(_fmt(group.metrics[n]) for n in names))
        table.add_section()
    table.add_row(
        "overall", str(result.overall.count), *(_fmt(result.overall.metrics[n]) for n in names),
        style="bold",
    )
    return table


def render(report: EvalReport, console: Console) -> None:
    for result in report.results:
        console.print(mode_table(report, result))
        console.print(
            f"search latency ({result.mode}, client-side, top_k={report.top_k}): "
            f"mean {result.latency['mean_ms']:.1f} ms, p95 {result.latency['p95_ms']:.1f} ms"
        )
        if result.calibration is not None:
            cal = result.calibration
            console.print(
                f"calibration ({result.mode}): evidence-bearing top hit labelled relevant "
                f"{_fmt(cal['top_hit_labelled_relevant'])} "
                f"of {cal['evidence_top_hits']:.0f} (goal 0.70); another user's search "
                f"labels nothing relevant {_fmt(cal['other_user_nothing_relevant'])} "
                f"of {cal['other_user_questions']:.0f} (goal 0.80)"
            )
    counts = ", ".join(f"{k}={v}" for k, v in report.counts.items())
    console.print(f"counts: {counts}")
    console.print(
        f"ingest: {report.ingest['seconds']:.1f} s, "
        f"{report.ingest['memories_per_s']:.1f} memories/s over {report.ingest['jobs']:.0f} jobs"
    )
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}")


def render_chat(report: ChatReport, console: Console) -> None:
    """The chat protocol's figures: per category, then the ingest and the latencies."""
    table = Table(title=f"{report.name} · protocol=chat · embedder={report.embedder}")
    for column in ("category", "n", "evidence in block", "empty blocks", "search evidence",
                   "block tokens mean", "p95"):
        table.add_column(column, justify="left" if column == "category" else "right")

    def row(label: str, g: Any, style: str | None = None) -> None:
        table.add_row(label, str(g.count), _fmt(g.evidence_in_block), str(g.empty_blocks),
                      _fmt(g.search_evidence), f"{g.tokens_mean:.0f}", f"{g.tokens_p95:.0f}",
                      style=style)

    if len(report.categories) > 1:
        for label, group in report.categories.items():
            row(label, group)
        table.add_section()
    row("overall", report.overall, style="bold")
    console.print(table)
    ing, lat = report.ingest, report.latency
    console.print(
        f"ingest: {ing['turns']:.0f} turns in {ing['interactions']:.0f} interactions, "
        f"{ing['seconds']:.1f} s, {ing['turns_per_s']:.1f} turns/s; {ing['memories']:.0f} "
        f"memories, {ing['memories_per_turn']:.3f} per turn")
    console.print(
        f"latency (client-side, defaults): /v1/context mean {lat['context']['mean_ms']:.1f} "
        f"ms, p95 {lat['context']['p95_ms']:.1f} ms; /v1/search mean "
        f"{lat['search']['mean_ms']:.1f} ms, p95 {lat['search']['p95_ms']:.1f} ms")
    if report.overall.other_user_empty is not None:
        console.print("calibration: the same questions asked of another user of the set got "
                      f"an empty block {report.overall.other_user_empty:.3f} of the time")

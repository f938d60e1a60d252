"""Operator commands of `memoryd` that talk to a running stack over HTTP, through the
Python client: status, search, add, list, forget, history, export, import, reindex, bench.

The logic lives in `workers/cli_ops.py`; this module parses options and prints. Tables
show memory ids in their short form (`cli_ops.short_ids`), and every command that takes a
memory id takes that form too (`cli_ops.resolve_memory_id`); `--json` prints what the API
answered, full ids included.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Final

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from memoryd.client import (
    ApiError,
    ConnectionFailed,
    JobTimeout,
    MemorydClient,
    NotFound,
    Unauthorized,
)
from memoryd.records.schemas import JobAccepted, MemoryView, SaveResult
from memoryd.workers.cli_ops import (
    Checkpoint,
    CliError,
    Target,
    jsonable,
    missing_key_message,
    read_import_file,
    resolve_memory_id,
    resolve_target,
    run_import,
    short_ids,
    summarize_metrics,
)

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)
# Every command group's help markup. Help texts are docstrings wrapped at the source's line
# length: read as Markdown, a paragraph's single line breaks are spaces and the terminal
# wraps it, where Rich's own markup kept each break mid-sentence.
HELP_MARKUP: Final = "markdown"

Url = Annotated[str | None, typer.Option(
    "--url", envvar="MEMORYD_URL", help="base URL (default http://127.0.0.1:8420)")]
Key = Annotated[str | None, typer.Option(
    "--key", envvar="MEMORYD_API_KEY",
    help="API key (default: MEMORYD_API_KEY in .env, else `<data-dir>/api-key`)")]
DataDir = Annotated[Path | None, typer.Option(
    "--data-dir", help="embedded stack's data dir, for its key file (default ~/.memoryd)")]
User = Annotated[str, typer.Argument(help="user id")]
MemoryId = Annotated[str, typer.Argument(
    help="the memory's id, or its first characters as tables show them")]
AsJson = Annotated[bool, typer.Option("--json", help="print JSON")]


OperatorKey = Annotated[str | None, typer.Option(
    "--key", envvar="MEMORYD_OPERATOR_KEY",
    help="operator key (default: MEMORYD_OPERATOR_KEY in .env, else `<data-dir>/operator-key`)")]


@contextmanager
def connected(url: str | None, key: str | None, data_dir: Path | None,
              operator: bool = False) -> Iterator[MemorydClient]:
    """A client for the stack, and one clear line instead of a traceback when it fails."""
    with session(resolve_target(url, key, data_dir, operator), operator) as client:
        yield client


@contextmanager
def session(target: Target, operator: bool = False, need_key: bool = True
            ) -> Iterator[MemorydClient]:
    """`connected` for a target already resolved; `need_key=False` (status) goes on
    without a key, for the routes that need none."""
    if target.key is None and need_key:
        fail(missing_key_message(target, operator), None)
    try:
        with MemorydClient(target.url, target.key, timeout=60) as client:
            yield client
    except ConnectionFailed as exc:
        fail(f"memoryd is not reachable at {target.url}: is it running? Start it with "
             f"'memoryd up', or pass --url / set MEMORYD_URL. ({exc.message})", exc)
    except Unauthorized as exc:
        variable = "MEMORYD_OPERATOR_KEY" if operator else "MEMORYD_API_KEY"
        fail(f"the API key was refused by {target.url} ({exc.message}); key from "
             f"{target.key_source}. Pass --key or set {variable}.", exc)
    except JobTimeout as exc:
        fail(f"{exc.message}; it keeps running: 'GET /v1/jobs/{exc.job.job_id}'", exc)
    except ApiError as exc:
        field = f" (field {exc.field})" if exc.field else ""
        fail(f"{exc.code}: {exc.message}{field}", exc)
    except CliError as exc:
        fail(str(exc), exc)
    except ValueError as exc:  # client-side validation by the API's own models
        fail(f"invalid input: {exc}", exc)


def fail(message: str, cause: BaseException | None) -> None:
    err.print(f"[red]error:[/red] {message}", markup=True, highlight=False)
    raise typer.Exit(1) from cause


def _target_line(target: Target) -> str:
    return f"{target.url} (key from {target.key_source})"


def _memory_table(items: list[MemoryView], scores: list[float] | None = None) -> Table:
    """Ids in their short form, never wrapped: a copied id is whole, and every command
    that takes a memory id accepts it."""
    table = Table(show_lines=False)
    if scores is not None:
        table.add_column("score", justify="right", no_wrap=True)
    table.add_column("id", no_wrap=True)
    for name in ("content", "type", "tags", "imp.", "occurred"):
        table.add_column(name, overflow="fold")
    shown = short_ids([m.id for m in items])
    for i, m in enumerate(items):
        row = [shown[m.id], m.content if m.enabled else f"[dim]{m.content} (disabled)[/dim]",
               m.type.value, ",".join(m.tags), str(m.importance),
               m.occurred_at.strftime("%Y-%m-%d %H:%M")]
        table.add_row(*([f"{scores[i]:.3f}"] if scores is not None else []), *row)
    return table


def status(url: Url = None, key: Key = None, data_dir: DataDir = None,
           metrics_token: Annotated[str | None, typer.Option(
               envvar="MEMORYD_METRICS_TOKEN", help="bearer token for /metrics")] = None,
           as_json: AsJson = False) -> None:
    """Is the stack up; queue depths per queue, what workers hold, failed jobs, stored
    memories."""
    target = resolve_target(url, key, data_dir)
    report: dict[str, Any] = {"url": target.url, "key_source": target.key_source}
    lines: list[str] = []
    with session(target, need_key=False) as client:
        ready = client.ready()
        report["status"] = ready.get("status") if isinstance(ready, dict) else None
        report["checks"] = ready.get("checks", {}) if isinstance(ready, dict) else {}
        lines.append(f"memoryd at {_target_line(target)}: [bold]{report['status']}[/bold]")
        lines.extend(f"  {name}: {state}" for name, state in report["checks"].items())
        if target.key is None:
            report["api_key"] = "missing"
            lines.append(f"  API key: none ({missing_key_message(target)})")
        else:
            try:
                client.job("status-probe")
            except NotFound:
                report["api_key"] = "accepted"
            except Unauthorized:
                raise
            except ApiError as exc:  # Redis down: the key cannot be checked, the rest can
                report["api_key"] = f"not checked ({exc.code})"
            lines.append(f"  API key: {report['api_key']}")
        try:
            summary = summarize_metrics(client.metrics(metrics_token))
        except Unauthorized:
            summary = None
            report["metrics"] = "protected"
            lines.append("  metrics: protected; pass --metrics-token or MEMORYD_METRICS_TOKEN")
    code = 0 if report["status"] == "ready" else 1
    if summary is not None:
        report.update(queues=summary.queues, running_or_reserved=summary.running_or_reserved,
                      scheduled=summary.scheduled_by_task,
                      failed_jobs=summary.failed_jobs, failures_by_task=summary.failures_by_task,
                      stored_memories=summary.stored)
    if as_json:
        out.print_json(jsonable(report))
        raise typer.Exit(code)
    for line in lines:
        out.print(line, highlight=False)
    if summary is None:
        raise typer.Exit(code)
    table = Table("queue", "waiting")
    for queue, depth in sorted(summary.queues.items()):
        table.add_row(queue, str(depth))
    # A worker takes a message off its queue when it starts it, or, for a task sent with a
    # countdown (a retry's backoff, the batched access-count flush), as soon as it is sent,
    # and holds it unacknowledged until it is due: those are counted apart, by task.
    table.add_row("(taken: running or reserved)", str(summary.running_or_reserved))
    for task, count in sorted(summary.scheduled_by_task.items()):
        table.add_row(f"(taken: held for a countdown) {task}", str(count))
    out.print(table)
    failed = ", ".join(f"{t}: {n}" for t, n in sorted(summary.failures_by_task.items()))
    out.print(f"failed jobs: {summary.failed_jobs}" + (f" ({failed})" if failed else ""))
    if summary.stored is not None:
        out.print(f"stored memories: {summary.stored}")
    raise typer.Exit(code)


def search(user: User, query: Annotated[str, typer.Argument(help="what to look for")],
           top_k: Annotated[int, typer.Option("--top-k", min=1, max=100)] = 5,
           mode: Annotated[str, typer.Option(help="hybrid, dense or keyword")] = "hybrid",
           as_json: AsJson = False, url: Url = None, key: Key = None,
           data_dir: DataDir = None) -> None:
    """Search a user's memories."""
    with connected(url, key, data_dir) as client:
        found = client.search(user, query, top_k=top_k, mode=mode)
    if as_json:
        out.print_json(found.model_dump_json())
        return
    if not found.results:
        out.print("no memories found")
        return
    out.print(_memory_table([h.memory for h in found.results],
                            [h.score for h in found.results]))


def add(user: User, text: Annotated[str, typer.Argument(help="the memory")],
        tag: Annotated[list[str] | None, typer.Option("--tag", help="repeatable")] = None,
        importance: Annotated[int, typer.Option(min=1, max=10)] = 5,
        key_name: Annotated[str | None, typer.Option(
            "--slot", help="a named slot: a later save under it replaces this one")] = None,
        as_json: AsJson = False, url: Url = None, key: Key = None,
        data_dir: DataDir = None) -> None:
    """Save a memory and say whether it was added or already known."""
    fields: dict[str, Any] = {"tags": tag or [], "importance": importance}
    if key_name:
        fields["key"] = key_name
    with connected(url, key, data_dir) as client:
        result = client.save(user, text, wait=20, **fields)
    if as_json:
        out.print_json(result.model_dump_json(exclude_none=True))
    elif isinstance(result, JobAccepted):
        out.print(f"queued as job {result.job_id} (still running)")
    elif isinstance(result, SaveResult) and result.outcome.value == "duplicate":
        out.print(f"already known (duplicate of {result.duplicate_of})")
    elif result.memory is not None:
        out.print(f"{result.outcome.value}: {result.memory.id}")


def list_(user: User, limit: Annotated[int, typer.Option(min=1, max=200)] = 20,
          type_: Annotated[str | None, typer.Option("--type")] = None,
          tag: Annotated[str | None, typer.Option()] = None,
          cursor: Annotated[str | None, typer.Option()] = None,
          as_json: AsJson = False, url: Url = None, key: Key = None,
          data_dir: DataDir = None) -> None:
    """List a user's memories, newest first."""
    with connected(url, key, data_dir) as client:
        page = client.list(user, limit=limit, type=type_, tag=tag, cursor=cursor)
    if as_json:
        out.print_json(page.model_dump_json())
        return
    out.print(_memory_table(page.items) if page.items else "no memories")
    if page.next_cursor:
        out.print(f"more: --cursor {page.next_cursor}")


def forget(user: User,
           memory_id: Annotated[str | None, typer.Argument(
               help="one memory: its id, or its first characters as tables show them")] = None,
           thread: Annotated[str | None, typer.Option(help="every memory of a thread")] = None,
           before: Annotated[datetime | None, typer.Option(help="occurred before")] = None,
           after: Annotated[datetime | None, typer.Option(help="occurred after")] = None,
           all_: Annotated[bool, typer.Option("--all", help="every memory of the user")] = False,
           as_json: AsJson = False, url: Url = None, key: Key = None,
           data_dir: DataDir = None) -> None:
    """Forget one memory, a thread, a time range, or everything of a user."""
    if memory_id is None and not (thread or before or after or all_):
        err.print("error: give a memory id, --thread, --before/--after or --all")
        raise typer.Exit(2)
    with connected(url, key, data_dir) as client:
        if memory_id is not None:
            result = client.forget(user, resolve_memory_id(client, user, memory_id), wait=30)
        else:
            result = client.forget(user, thread_id=thread, before=before, after=after,
                                   all=all_, wait=30)
    if as_json:
        out.print_json(result.model_dump_json() if isinstance(result, JobAccepted)
                       else jsonable(result))
    elif isinstance(result, JobAccepted):
        out.print(f"queued as job {result.job_id} (still running)")
    else:
        out.print(f"forgotten: {result.get('deleted', 0)}")


def history(user: User, memory_id: MemoryId, as_json: AsJson = False, url: Url = None,
            key: Key = None, data_dir: DataDir = None) -> None:
    """The audit trail of one memory (what changed, when, by which job), oldest first."""
    with connected(url, key, data_dir) as client:
        found = client.history(user, resolve_memory_id(client, user, memory_id))
    if as_json:
        out.print_json(found.model_dump_json())
        return
    shown = short_ids(sorted({found.memory_id, *found.versions,
                              *(e.memory_id for e in found.events)}))
    versions = " → ".join(shown[v] for v in found.versions)
    out.print(f"memory {shown[found.memory_id]}" +
              (f", versions {versions} (oldest first)" if len(found.versions) > 1 else ""),
              highlight=False)
    table = Table()
    for name in ("at", "event", "version", "job"):
        table.add_column(name, no_wrap=True)
    table.add_column("before → after", overflow="fold")
    jobs = short_ids(sorted({e.job_id for e in found.events if e.job_id}))
    for e in found.events:
        change = " → ".join(part for part in (e.before, e.after) if part is not None)
        table.add_row(e.at.strftime("%Y-%m-%d %H:%M:%S"), e.event, shown[e.memory_id],
                      jobs.get(e.job_id or "", "-"), change or "-")
    out.print(table)


def export(user: User,
           output: Annotated[Path | None, typer.Option(
               "--out", "-o", help="JSONL file (default: standard output)")] = None,
           url: Url = None, key: Key = None, data_dir: DataDir = None) -> None:
    """Write every memory of a user as JSON lines (no vectors)."""
    import json

    count = 0
    with connected(url, key, data_dir) as client:
        if output is None:
            for record in client.export(user):
                sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
            return
        tmp = output.with_name(output.name + ".partial")
        with tmp.open("w", encoding="utf-8") as handle, _progress(None) as bar:
            task = bar.add_task("exporting", total=None)
            for record in client.export(user):
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                count += 1
                bar.advance(task)
        tmp.replace(output)
    err.print(f"exported {count} memories to {output}")


def import_(user: User, file: Annotated[Path, typer.Argument(help="JSONL, as export writes")],
            batch: Annotated[int, typer.Option(min=1, max=1000, help="records per request")] = 100,
            checkpoint_file: Annotated[Path | None, typer.Option(
                "--checkpoint", help="default: `<file>.checkpoint`")] = None,
            restart: Annotated[bool, typer.Option(help="ignore the checkpoint")] = False,
            as_json: AsJson = False, url: Url = None, key: Key = None,
            data_dir: DataDir = None) -> None:
    """Import a JSONL file; resumable (a checkpoint records the last imported line)."""
    with connected(url, key, data_dir) as client:
        source = read_import_file(file)
        path = checkpoint_file or file.with_name(file.name + ".checkpoint")
        checkpoint = Checkpoint.load(path, source, user)
        if restart:
            checkpoint = Checkpoint(path, source.digest, user)
        if checkpoint.done:
            err.print(f"{file} was already imported for {user} (checkpoint {path}); "
                      "use --restart to import it again")
            if as_json:
                out.print_json(jsonable({"already_imported": True, "checkpoint": str(path)}))
            return
        if checkpoint.line:
            err.print(f"resuming after line {checkpoint.line} (checkpoint {path})")
        with _progress(len(source.lines)) as bar:
            task = bar.add_task("importing", total=len(source.lines))
            report = run_import(client, user, source, checkpoint, batch,
                                lambda n: bar.advance(task, n))
    if as_json:
        out.print_json(jsonable({"records": report.records, "batches": report.batches,
                                 "skipped": report.skipped, **report.counts}))
    counts = ", ".join(f"{n} {k}" for k, n in report.counts.items())
    err.print(f"imported {report.records} records in {report.batches} batches ({counts})"
              + (f"; {report.skipped} done before" if report.skipped else ""))


def reindex(embedder: Annotated[str, typer.Option(help="the new embedder, e.g. use")],
            wait: Annotated[float, typer.Option(help="seconds to follow the job")] = 0,
            as_json: AsJson = False, url: Url = None, key: OperatorKey = None,
            data_dir: DataDir = None) -> None:
    """Re-embed every memory with another embedder, with no downtime (server side).

    Store-wide: needs an operator key."""
    with connected(url, key, data_dir, operator=True) as client:
        try:
            started = client.reindex(embedder=embedder)
        except NotFound as exc:
            fail("this server has no POST /v1/admin/reindex; upgrade the stack", exc)
        job_id = started.get("job_id") if isinstance(started, dict) else None
        if as_json:
            out.print_json(jsonable(started))
        elif isinstance(started, dict):
            out.print("\n".join(f"{k}: {v}" for k, v in started.items()), highlight=False)
        if wait > 0 and job_id:
            job = client.wait(str(job_id), timeout=wait, operator=True)
            if as_json:
                out.print_json(job.model_dump_json())
            else:
                error = job.error or {}
                out.print(f"job {job.job_id}: {job.status.value}" + (
                    f" ({error.get('code')}: {error.get('message')})" if error else ""),
                    highlight=False)


def bench(ctx: typer.Context) -> None:
    """Run `python -m ops.bench` (a checkout only); options pass through, see --help there."""
    root = Path(__file__).resolve().parents[1]
    if not (root / "ops" / "bench" / "run.py").is_file():
        err.print("error: ops/bench/ is not here: run 'memoryd bench' from a checkout")
        raise typer.Exit(1)
    # The checkout first on the path: `-m ops.bench` then finds it from any directory.
    path = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
    raise typer.Exit(subprocess.call([sys.executable, "-m", "ops.bench", *ctx.args],
                                     env={**os.environ, "PYTHONPATH": path}))


@contextmanager
def _progress(total: int | None) -> Iterator[Progress]:
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=False) as bar:
        yield bar


def register(app: typer.Typer) -> None:
    app.command()(status)
    app.command()(search)
    app.command()(add)
    app.command(name="list")(list_)
    app.command()(forget)
    app.command()(history)
    app.command()(export)
    app.command(name="import")(import_)
    app.command()(reindex)
    app.command(context_settings={"allow_extra_args": True,
                                  "ignore_unknown_options": True})(bench)

"""The `memoryd` command: the embedded stack, and the server-mode processes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from shared.errors import AppError
from shared.settings import Settings
from workers import cli_commands

app = typer.Typer(help="memoryd: long-term memory for chat agents.", no_args_is_help=True)
console = Console(stderr=False)


def _settings(**overrides: object) -> Settings:
    base = Settings()
    return base.model_copy(update={k: v for k, v in overrides.items() if v is not None})


@app.command()
def up(
    host: Annotated[str | None, typer.Option(help="bind address (default 127.0.0.1)")] = None,
    port: Annotated[int | None, typer.Option(help="HTTP port (default 8420)")] = None,
    data_dir: Annotated[Path | None, typer.Option(help="where memories live")] = None,
) -> None:
    """Start the embedded stack: gateway, worker, embedded Qdrant and (if needed) Redis."""
    from workers.stack import EmbeddedStack

    settings = _settings(host=host, port=port, data_dir=data_dir)
    stack = EmbeddedStack(settings)
    try:
        info = stack.prepare()
    except AppError as exc:
        stack.stop()
        console.print(f"[red]memoryd could not start:[/red] {exc.message}")
        raise typer.Exit(1) from exc
    console.print(f"memoryd is up at [bold]{info.base_url}[/bold]")
    console.print(f"API docs: {info.base_url}/docs")
    if info.api_key:
        console.print(f"API key (tenant 'default'): [bold]{info.api_key}[/bold]")
    console.print(f"data directory: {info.data_dir}")
    console.print(f"redis: {info.redis_url}")
    console.print("Press Ctrl-C to stop.")
    stack.serve_forever()


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="bind address")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port")] = 8420,
) -> None:
    """Server mode: the gateway alone (Qdrant server and workers run elsewhere)."""
    import uvicorn

    from api.app import create_app
    from shared.auth import KeyRing
    from shared.logs import configure_logging
    from shared.runtime import get_runtime

    settings = _settings()
    configure_logging(settings.log_level, settings.log_json)
    if settings.store_backend != "qdrant":
        console.print(
            "[red]memoryd serve needs MEMORYD_QDRANT_URL[/red]; use 'memoryd up' for one process"
        )
        raise typer.Exit(2)
    runtime = get_runtime()
    application = create_app(runtime, KeyRing.from_settings(settings, embedded=False))
    uvicorn.run(application, host=host, port=port, log_config=None, access_log=False)


@app.command()
def worker(
    concurrency: Annotated[int, typer.Option(help="worker processes")] = 2,
    queues: Annotated[str, typer.Option(help="comma-separated queues")] = "memory,llm",
    loglevel: Annotated[str, typer.Option(help="log level")] = "INFO",
) -> None:
    """Server mode: a Celery worker process (prefork pool)."""
    from workers.process import run_worker

    run_worker(concurrency=concurrency, queues=queues, loglevel=loglevel)


@app.command()
def beat(loglevel: Annotated[str, typer.Option(help="log level")] = "INFO") -> None:
    """Server mode: Celery beat, for periodic maintenance tasks."""
    from workers.process import run_beat

    run_beat(loglevel=loglevel)


@app.command(name="eval")
def eval_(
    dataset: Annotated[str, typer.Argument(help="locomo or madial (see ../shared/bench)")],
    data: Annotated[Path | None, typer.Option(help="locomo: locomo10.json")] = None,
    memory: Annotated[Path | None, typer.Option(help="madial: the memory archive")] = None,
    dialogue: Annotated[Path | None, typer.Option(help="madial: the dialogues")] = None,
    mode: Annotated[list[str] | None, typer.Option(
        help="dense|keyword|hybrid, repeatable or comma-separated (default hybrid)")] = None,
    embedder: Annotated[str | None, typer.Option(help="default: from settings")] = None,
    out: Annotated[Path | None, typer.Option(help="JSON report path")] = None,
    data_dir: Annotated[Path | None, typer.Option(help="default: a temp dir, removed")] = None,
    limit_conversations: Annotated[int | None, typer.Option(min=1)] = None,
    limit_questions: Annotated[int | None, typer.Option(min=1)] = None,
    as_of: Annotated[str | None, typer.Option(help="ISO time for recency scoring")] = None,
) -> None:
    """Retrieval quality on a benchmark, through the real stack's write path and gateway."""
    from shared.evaluation import EvalError
    from shared.evaluation.runner import EvalOptions, parse_as_of, parse_modes, run_command

    try:
        options = EvalOptions(
            dataset=dataset, modes=parse_modes(mode or ["hybrid"]), data=data, memory=memory,
            dialogue=dialogue, embedder=embedder, data_dir=data_dir,
            limit_conversations=limit_conversations, limit_questions=limit_questions,
            as_of=parse_as_of(as_of),
        )
        run_command(options, out, console)
    except EvalError as exc:
        console.print(f"[red]memoryd eval failed:[/red] {exc}")
        raise typer.Exit(1) from exc


# Commands that talk to a running stack over HTTP (status, search, add, list, forget,
# history, export, import, reindex, bench): workers/cli_commands.py.
cli_commands.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()

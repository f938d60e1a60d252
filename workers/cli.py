"""The `memoryd` command: the embedded stack, and the server-mode processes."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import ValidationError
from rich.console import Console

from memoryd.platform.errors import AppError
from memoryd.platform.logs import mask_url_passwords
from memoryd.platform.settings import ENV_FILE_VARIABLE, Settings, describe, env_file_path
from memoryd.workers import cli_commands, cli_webhooks
from memoryd.workers.cli_commands import HELP_MARKUP

if TYPE_CHECKING:
    from memoryd.tenancy.api_keys import ApiKeyStore

app = typer.Typer(help="memoryd: long-term memory for chat agents.", no_args_is_help=True,
                  rich_markup_mode=HELP_MARKUP)
console = Console(stderr=False)


def package_version() -> str:
    """The installed distribution's version (pyproject.toml's, through its metadata)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memoryd")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "0+unknown"


def _version(value: bool) -> None:
    if value:
        console.print(f"memoryd {package_version()}", highlight=False)
        raise typer.Exit(0)


@app.callback()
def main_options(
    env_file: Annotated[Path | None, typer.Option(
        "--env-file", help="read settings from this dotenv file instead of ./.env "
        f"(or set {ENV_FILE_VARIABLE}); MEMORYD_* environment variables win over it")] = None,
    version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_version, help="print the version and exit")
    ] = False,
) -> None:
    """memoryd: long-term memory for chat agents."""
    if env_file is not None:
        if not env_file.is_file() and str(env_file) != os.devnull:
            console.print(f"[red]--env-file {env_file}: no such file[/red]", highlight=False)
            raise typer.Exit(2)
        # Through the environment: every Settings() of this process, and the processes it
        # starts (`bench`), read the same file.
        os.environ[ENV_FILE_VARIABLE] = str(env_file.resolve())
    try:
        env_file_path()
    except FileNotFoundError as exc:
        console.print(f"[red]{exc}[/red]", highlight=False)
        raise typer.Exit(2) from exc


def _settings(**overrides: object) -> Settings:
    try:
        base = Settings()
    except ValidationError as exc:
        # A bad MEMORYD_* variable: name it, where it was set, and what it should be.
        where = env_file_path()
        for error in exc.errors():
            name = "MEMORYD_" + "_".join(str(part) for part in error["loc"]).upper()
            origin = "" if where is None or name in os.environ else f" (from {where})"
            console.print(f"[red]invalid setting {name}{origin}:[/red] {error['msg']}",
                          highlight=False)
        raise typer.Exit(2) from exc
    return base.model_copy(update={k: v for k, v in overrides.items() if v is not None})


@app.command()
def up(
    host: Annotated[str | None, typer.Option(help="bind address (default 127.0.0.1)")] = None,
    port: Annotated[int | None, typer.Option(help="HTTP port (default 8420)")] = None,
    data_dir: Annotated[Path | None, typer.Option(help="where memories live")] = None,
) -> None:
    """Start the embedded stack: gateway, worker, embedded Qdrant and (if needed) Redis."""
    # Settings first: importing the stack reads them too, and would fail with a traceback.
    settings = _settings(host=host, port=port, data_dir=data_dir)
    from memoryd.workers.stack import EmbeddedStack

    stack = EmbeddedStack(settings)
    try:
        info = stack.prepare()
    except AppError as exc:
        stack.stop()
        console.print(f"[red]memoryd could not start:[/red] {mask_url_passwords(exc.message)}")
        raise typer.Exit(1) from exc
    console.print(f"memoryd is up at [bold]{info.base_url}[/bold]")
    console.print(f"API docs: {info.base_url}/docs")
    if info.api_key:
        console.print(f"API key (tenant 'default'): [bold]{info.api_key}[/bold]")
    if info.operator_key_file:
        console.print(f"operator key (store-wide /v1/admin/*): in {info.operator_key_file}",
                      highlight=False, soft_wrap=True)
    console.print(f"data directory: {info.data_dir}")
    console.print(f"redis: {mask_url_passwords(info.redis_url)}", highlight=False)
    console.print("Press Ctrl-C to stop.")
    stack.serve_forever()


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="bind address (default 127.0.0.1)")] = None,
    port: Annotated[int | None, typer.Option(help="HTTP port (default 8420)")] = None,
) -> None:
    """Server mode: the gateway alone (Qdrant server and workers run elsewhere)."""
    # Settings first, as in `up`: MEMORYD_HOST and MEMORYD_PORT apply here too.
    settings = _settings(host=host, port=port)
    import uvicorn

    from memoryd.api.app import create_app
    from memoryd.platform.logs import configure_logging
    from memoryd.runtime import settle_for_serving
    from memoryd.tenancy.auth import KeyRing
    from memoryd.workers.bootstrap import get_runtime
    from memoryd.workers.stack import check_port_free, dump_threads_on_sigusr1, exit_on_sigterm

    configure_logging(settings.log_level, settings.log_json_choice)
    if settings.store_backend != "qdrant":
        console.print(
            "[red]memoryd serve needs MEMORYD_QDRANT_URL[/red]; use 'memoryd up' for one process"
        )
        raise typer.Exit(2)
    try:
        keyring = KeyRing.from_settings(settings, embedded=False)
        check_port_free(settings.host, settings.port)
    except AppError as exc:
        console.print(f"[red]memoryd could not start:[/red] {mask_url_passwords(exc.message)}")
        raise typer.Exit(1) from exc
    runtime = get_runtime()
    application = create_app(runtime, keyring, server_mode=True)
    settle_for_serving(runtime)
    exit_on_sigterm()
    dump_threads_on_sigusr1()
    try:
        uvicorn.run(application, host=settings.host, port=settings.port, log_config=None,
                    access_log=False)
    finally:
        runtime.close()  # pushes the last window of search access counts


@app.command()
def worker(
    concurrency: Annotated[int, typer.Option(help="worker processes")] = 2,
    queues: Annotated[str, typer.Option(
        help="comma-separated queues, taken in this order")] = "memory,llm,bulk",
    loglevel: Annotated[str, typer.Option(help="log level")] = "INFO",
    hostname: Annotated[str | None, typer.Option(
        help="Celery node name, e.g. llm-1@%h (several workers on one host)")] = None,
) -> None:
    """Server mode: a Celery worker process (prefork pool)."""
    from memoryd.workers.process import run_worker

    run_worker(concurrency=concurrency, queues=queues, loglevel=loglevel, hostname=hostname)


@app.command()
def beat(loglevel: Annotated[str, typer.Option(help="log level")] = "INFO") -> None:
    """Server mode: Celery beat, for periodic maintenance tasks."""
    from memoryd.workers.process import run_beat

    run_beat(loglevel=loglevel)


@app.command(name="eval")
def eval_(
    dataset: Annotated[str, typer.Argument(
        help="locomo, madial or longmemeval (see ../shared/bench)")],
    data: Annotated[Path | None, typer.Option(
        help="locomo: locomo10.json; longmemeval: longmemeval_s_*.json[.xz]")] = None,
    memory: Annotated[Path | None, typer.Option(help="madial: the memory archive")] = None,
    odd_memory: Annotated[Path | None, typer.Option(
        help="madial: the same memories in another language; their odd ids replace "
             "--memory's (a mixed archive)")] = None,
    dialogue: Annotated[Path | None, typer.Option(help="madial: the dialogues")] = None,
    mode: Annotated[list[str] | None, typer.Option(
        help="dense|keyword|hybrid, repeatable or comma-separated (default hybrid)")] = None,
    embedder: Annotated[str | None, typer.Option(help="default: from settings")] = None,
    out: Annotated[Path | None, typer.Option(help="JSON report path")] = None,
    data_dir: Annotated[Path | None, typer.Option(help="default: a temp dir, removed")] = None,
    limit_conversations: Annotated[int | None, typer.Option(
        min=1, help="the first N conversations: LoCoMo samples, MADial dialogues, "
                    "LongMemEval questions (each owns its haystack)")] = None,
    limit_questions: Annotated[int | None, typer.Option(min=1)] = None,
    as_of: Annotated[str | None, typer.Option(help="ISO time for recency scoring")] = None,
    name: Annotated[str | None, typer.Option(
        help="the set's name in the report and its file (default: the dataset)")] = None,
    calibration: Annotated[bool, typer.Option(
        help="also ask each question of another user: do scores mean relevant?")] = False,
    long_turns: Annotated[int | None, typer.Option(
        min=1, help="locomo: join each session's turns into memories of at least this many "
                    "characters (long chat turns)")] = None,
    per_category: Annotated[int | None, typer.Option(
        min=1, help="only the first N questions of each category (quick runs)")] = None,
    protocol: Annotated[str, typer.Option(
        help="ranking: raw memories through /v1/search; chat: turns posted as a chat server "
             "posts them (default extraction), questions through /v1/context")] = "ranking",
    crowd: Annotated[int, typer.Option(
        min=0, help="first store this many memories of unrelated users (generated, fixed "
                    "seed) in the same store, as a shared store holds")] = 0,
) -> None:
    """Retrieval quality on a benchmark, through the real stack's write path and gateway.

    With --calibration, each mode also reports how often a top hit that bears evidence is
    labelled at least `relevant` (score >= 0.5), and how often the same question asked of
    another user of the set (who has none of its memories) gets no hit labelled so.

    With --protocol chat (locomo, longmemeval), each conversation is posted turn by turn
    with the default extraction and each question asks /v1/context at its defaults: the
    share of questions whose block holds an evidence turn, empty blocks, memories per turn,
    block tokens, ingest turns/s, and /v1/context beside /v1/search latency (every
    question timed twice, the routes in one order and then the other).

    With --crowd N, N memories of other users (English and Chinese everyday sentences)
    are stored through the import API before the set: a user's ranking must not move
    with them (docs/decisions/0029-keyword-statistics-no-one-else-moves.md); the report
    records N."""
    from memoryd.evaluation import EvalError
    from memoryd.evaluation.runner import (
        EvalOptions,
        parse_as_of,
        parse_modes,
        parse_name,
        parse_protocol,
        run_command,
    )
    from memoryd.workers.eval_stack import embedded_stack

    try:
        options = EvalOptions(
            dataset=dataset, modes=parse_modes(mode or ["hybrid"]), data=data, memory=memory,
            odd_memory=odd_memory, dialogue=dialogue, embedder=embedder, data_dir=data_dir,
            limit_conversations=limit_conversations, limit_questions=limit_questions,
            as_of=parse_as_of(as_of), calibration=calibration,
            name=parse_name(name), long_turns=long_turns, per_category=per_category,
            protocol=parse_protocol(protocol), crowd=crowd,
        )
        run_command(options, embedded_stack, out, console)
    except EvalError as exc:
        console.print(f"[red]memoryd eval failed:[/red] {exc}")
        raise typer.Exit(1) from exc


# Commands that talk to a running stack over HTTP (status, search, add, list, forget,
# history, export, import, reindex, bench): workers/cli_commands.py.
cli_commands.register(app)
keys_app = typer.Typer(help="API keys (hashed in Redis): create, list, revoke.",
                       no_args_is_help=True, rich_markup_mode=HELP_MARKUP)
app.add_typer(keys_app, name="keys")
app.add_typer(cli_webhooks.app, name="webhooks")  # over HTTP, as cli_commands


def _key_store() -> ApiKeyStore:
    import redis

    from memoryd.platform.redis_runtime import embedded_client_url
    from memoryd.tenancy.api_keys import ApiKeyStore

    settings = _settings()
    # The embedded stack's own Redis has a password kept in its data directory.
    url = embedded_client_url(settings.redis_url, settings.data_dir)
    client = redis.Redis.from_url(url, socket_timeout=settings.redis_timeout_s,
                                  socket_connect_timeout=settings.redis_timeout_s)
    return ApiKeyStore(client)


def _keys_call(action: Callable[[], None]) -> None:
    from redis.exceptions import RedisError

    try:
        action()
    except AppError as exc:
        console.print(f"[red]{exc.code}:[/red] {exc.message}")
        raise typer.Exit(1) from exc
    except RedisError as exc:
        console.print("[red]Redis is unreachable at MEMORYD_REDIS_URL:[/red] "
                      f"{mask_url_passwords(str(exc))}")
        raise typer.Exit(1) from exc


@keys_app.command("create")
def keys_create(
    tenant: Annotated[str | None, typer.Option(help="the tenant the key acts for")] = None,
    scopes: Annotated[str, typer.Option(help="comma-separated: read, write, admin")] = "read,write",
    name: Annotated[str | None, typer.Option(help="a label for the key")] = None,
    operator: Annotated[bool, typer.Option(
        "--operator", help="an operator key: store-wide routes only (/v1/admin/*), no tenant")
    ] = False,
    as_json: cli_commands.AsJson = False,
) -> None:
    """Create a key and print it once (only its SHA-256 is kept)."""
    from memoryd.tenancy.api_keys import parse_scopes

    if operator == (tenant is not None):
        console.print("[red]give either --tenant (a tenant's key) or --operator[/red]")
        raise typer.Exit(2)

    def run() -> None:
        store = _key_store()
        if tenant is None:
            key, info = store.create_operator(name)
        else:
            key, info = store.create(tenant, parse_scopes(scopes), name)
        if as_json:
            cli_commands.out.print_json(json.dumps({"key": key, **info.model_dump(mode="json")}))
            return
        console.print(key, highlight=False, soft_wrap=True)
        console.print(f"id {info.id}, tenant {info.tenant}, scopes "
                      f"{','.join(info.scopes)}: store the key now, it is not shown again",
                      highlight=False)

    _keys_call(run)


@keys_app.command("list")
def keys_list(as_json: cli_commands.AsJson = False) -> None:
    """Every key made with `keys create`: id, prefix, tenant, scopes, created, revoked."""

    def run() -> None:
        infos = _key_store().list()
        if as_json:
            cli_commands.out.print_json(json.dumps([i.model_dump(mode="json") for i in infos]))
            return
        for info in infos:
            revoked = info.revoked_at.isoformat() if info.revoked_at else "-"
            console.print(
                f"{info.id}\t{info.prefix}…\t{info.tenant}\t{','.join(info.scopes)}\t"
                f"{info.created_at.isoformat()}\trevoked={revoked}\t{info.name or ''}",
                highlight=False, soft_wrap=True,
            )

    _keys_call(run)


@keys_app.command("revoke")
def keys_revoke(key_id: Annotated[str, typer.Argument(help="the id `keys list` shows")],
                as_json: cli_commands.AsJson = False) -> None:
    """Revoke a key: the next request with it answers 401."""

    def run() -> None:
        info = _key_store().revoke(key_id)
        if as_json:
            cli_commands.out.print_json(info.model_dump_json())
            return
        console.print(f"revoked {info.id} (tenant {info.tenant})", highlight=False)

    _keys_call(run)


@app.command()
def erase(
    wait: Annotated[float, typer.Option(help="seconds to wait for it to finish")] = 600.0,
    as_json: cli_commands.AsJson = False,
) -> None:
    """Compact now: forgotten text leaves the store's and Redis's files (a running stack's
    worker does it; MEMORYD_ERASURE_COMPACTION_S bounds it otherwise)."""
    from memoryd.memories import erasure
    from memoryd.platform.redis_runtime import embedded_client_url
    from memoryd.runtime import Runtime

    settings = _settings()
    # The embedded stack's own Redis has a password kept in its data directory.
    runtime = Runtime(settings.model_copy(
        update={"redis_url": embedded_client_url(settings.redis_url, settings.data_dir)}))
    try:
        target = erasure.request(runtime.redis, runtime.celery)
        if not erasure.wait_compacted(runtime.redis, target, wait):
            console.print(f"[red]the compaction did not finish within {wait:g}s[/red]")
            raise typer.Exit(1)
    finally:
        runtime.close()
    if as_json:
        cli_commands.out.print_json(json.dumps({"compacted": True}))
        return
    console.print("compacted: forgotten text is gone from the store's and Redis's files")


@app.command()
def mcp(
    user: Annotated[str, typer.Option("--user", help="the user id every tool acts for")],
    url: cli_commands.Url = None,
    key: cli_commands.Key = None,
    data_dir: cli_commands.DataDir = None,
) -> None:
    """Serve the MCP tools over stdio for one user (Claude Desktop, Claude Code, Cursor),
    talking to a running stack; stdout carries the protocol only."""
    import functools

    import anyio
    from pydantic import TypeAdapter

    from memoryd.integrations.mcp_stdio import serve_stdio
    from memoryd.platform.logs import configure_logging
    from memoryd.records.schemas import Identifier
    from memoryd.workers.cli_ops import missing_key_message, resolve_target

    settings = _settings()
    try:
        TypeAdapter(Identifier).validate_python(user)
    except ValidationError as exc:
        cli_commands.err.print(f"invalid --user: {exc.errors()[0]['msg']}", highlight=False)
        raise typer.Exit(2) from exc
    target = resolve_target(url, key, data_dir)
    if target.key is None:
        cli_commands.err.print(f"error: {missing_key_message(target)}", highlight=False)
        raise typer.Exit(1)
    configure_logging(settings.log_level, settings.log_json_choice)  # to stderr: stdout is MCP's
    anyio.run(functools.partial(serve_stdio, target.url, target.key, user,
                                wait_s=settings.mcp_wait_s))


@app.command()
def config(
    as_json: cli_commands.AsJson = False,
    changed: Annotated[bool, typer.Option(
        "--changed", help="only the settings that are not at their default")] = False,
) -> None:
    """The effective settings, secrets masked, and where each came from: the environment
    (env), the dotenv file (its path), or the default."""
    settings = _settings()
    rows = [r for r in describe(settings) if not changed or r.source != "default"]
    path = env_file_path()
    if as_json:
        cli_commands.out.print_json(json.dumps({
            "env_file": None if path is None else str(path),
            "settings": [{"name": r.variable, "value": r.value, "source": r.source}
                         for r in rows]}, default=str))
        return
    from rich.table import Table

    where = str(path) if path is not None else (
        f"none (no ./.env here; --env-file or {ENV_FILE_VARIABLE} names one)")
    cli_commands.out.print(f"dotenv file: {where}", highlight=False)
    table = Table("setting", "value", "source")
    table.columns[0].no_wrap = True
    table.columns[1].overflow = "fold"
    table.columns[2].overflow = "fold"
    for r in rows:
        value = "" if r.value is None else str(r.value)
        table.add_row(r.variable, value, r.source)
    cli_commands.out.print(table)


def main() -> None:
    app()


if __name__ == "__main__":
    main()

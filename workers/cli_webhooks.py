"""`memoryd webhooks add|list|remove|deliveries|rotate-secret`: a tenant's webhook endpoints,
through the Python client over HTTP (the key needs the `admin` scope), like the other
commands that talk to a running stack."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from memoryd.workers.cli_commands import (
    HELP_MARKUP,
    AsJson,
    DataDir,
    Key,
    Url,
    connected,
    out,
)

app = typer.Typer(help="Webhook endpoints of the key's tenant: add, list, remove, deliveries.",
                  no_args_is_help=True, rich_markup_mode=HELP_MARKUP)

WebhookId = Annotated[str, typer.Argument(help="the endpoint id `webhooks list` shows")]


@app.command("add")
def add(
    url: Annotated[str, typer.Argument(help="the receiver's http(s) URL")],
    event: Annotated[list[str], typer.Option(
        "--event", "-e", help="job.succeeded, job.failed, memory.added, memory.updated, "
        "memory.deleted; repeatable or comma-separated")],
    include_content: Annotated[bool, typer.Option(
        "--include-content", help="memory events carry the memories' text")] = False,
    description: Annotated[str | None, typer.Option(help="a label")] = None,
    url_: Url = None, key: Key = None, data_dir: DataDir = None, as_json: AsJson = False,
) -> None:
    """Register an endpoint and print its signing secret (shown this once)."""
    events = [e.strip() for group in event for e in group.split(",") if e.strip()]
    with connected(url_, key, data_dir) as client:
        created = client.create_webhook(url, events, include_content=include_content,
                                        description=description)
    if as_json:
        out.print_json(created.model_dump_json())
        return
    out.print(f"{created.id}\t{created.url}\t{','.join(created.events)}", highlight=False)
    out.print(f"secret: {created.secret}", highlight=False)
    out.print("store the secret now: it is not shown again", highlight=False)


@app.command("list")
def list_(url_: Url = None, key: Key = None, data_dir: DataDir = None,
          as_json: AsJson = False) -> None:
    """The tenant's endpoints (never their secrets)."""
    with connected(url_, key, data_dir) as client:
        page = client.list_webhooks()
    if as_json:
        out.print_json(page.model_dump_json())
        return
    for item in page.items:
        content = "content" if item.include_content else "ids"
        out.print(f"{item.id}\t{item.url}\t{','.join(item.events)}\t{content}\t"
                  f"{item.created_at.isoformat()}\t{item.description or ''}", highlight=False)


@app.command("remove")
def remove(webhook_id: WebhookId, url_: Url = None, key: Key = None,
           data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """Remove an endpoint and its delivery log."""
    with connected(url_, key, data_dir) as client:
        client.delete_webhook(webhook_id)
    if as_json:
        out.print_json(json.dumps({"removed": webhook_id}))
        return
    out.print(f"removed {webhook_id}", highlight=False)


@app.command("rotate-secret")
def rotate_secret(webhook_id: WebhookId, url_: Url = None, key: Key = None,
                  data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """A new signing secret, printed once; the old one stops verifying at once."""
    with connected(url_, key, data_dir) as client:
        created = client.rotate_webhook_secret(webhook_id)
    if as_json:
        out.print_json(created.model_dump_json())
        return
    out.print(f"secret: {created.secret}", highlight=False)


@app.command("deliveries")
def deliveries(
    webhook_id: WebhookId,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 20,
    url_: Url = None, key: Key = None, data_dir: DataDir = None, as_json: AsJson = False,
) -> None:
    """Recent deliveries, newest first: status, attempts, last code and error, next retry."""
    with connected(url_, key, data_dir) as client:
        page = client.webhook_deliveries(webhook_id, limit)
    if as_json:
        out.print_json(json.dumps(page.model_dump(mode="json")))
        return
    for d in page.items:
        retry = d.next_retry_at.isoformat() if d.next_retry_at else "-"
        out.print(f"{d.id}\t{d.event.value}\t{d.status.value}\tattempts={d.attempts}\t"
                  f"code={d.last_status_code or '-'}\tnext={retry}\t{d.last_error or ''}",
                  highlight=False)

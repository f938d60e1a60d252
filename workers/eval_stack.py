"""The stack `memoryd eval` runs against: the real embedded stack in this process, with a
Redis of its own (`memoryd.evaluation.runner.StackFactory`)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memoryd.evaluation import EvalError
from memoryd.evaluation.ingest import API_KEY
from memoryd.platform.errors import AppError
from memoryd.platform.redis_runtime import free_port
from memoryd.platform.settings import Settings
from memoryd.workers.stack import EmbeddedStack


@contextmanager
def embedded_stack(data_dir: Path | None, embedder: str | None) -> Iterator[tuple[str, Settings]]:
    """The real stack in this process, with a Redis of its own; always stopped again."""
    with embedded_stack_with_runtime(data_dir, embedder) as (base_url, stack):
        yield base_url, stack.settings


@contextmanager
def embedded_stack_with_runtime(
    data_dir: Path | None, embedder: str | None,
) -> Iterator[tuple[str, EmbeddedStack]]:
    """As `embedded_stack`, yielding the stack itself, whose runtime tools that look inside
    a search use (`ops/bench/fusion.py`)."""
    own_dir = data_dir is None
    root = Path(tempfile.mkdtemp(prefix="memoryd-eval-")) if data_dir is None else data_dir
    values: dict[str, Any] = {
        "data_dir": root, "port": free_port(),
        "redis_url": f"redis://127.0.0.1:{free_port()}/0", "worker_concurrency": 2,
        "log_level": "WARNING", "api_keys": f"{API_KEY}=eval",
        # Every mode runs the same questions: a query-vector cache would let later modes skip
        # the embedding, and the boost for past access would reward what earlier searches
        # returned. Both would make the numbers depend on the order of the modes.
        "query_cache_size": 0, "search_access_weight": 0.0,
        # LongMemEval's turns run to 14,000 characters: the gateway's length guards are
        # raised so every turn of the data is posted as it is (they shape no ranking).
        "max_content_chars": 16384, "max_message_bytes": 65536,
    }
    if embedder is not None:
        values["embedder"] = embedder
    stack = EmbeddedStack(Settings(**values))
    try:
        try:
            info = stack.prepare()
            stack.start_in_background()
        except AppError as exc:
            raise EvalError(f"the stack did not start: {exc.message}") from exc
        yield info.base_url, stack
    finally:
        stack.stop()
        if own_dir:
            shutil.rmtree(root, ignore_errors=True)

"""Server-mode worker and beat processes."""

from __future__ import annotations

from typing import Any

from celery.signals import setup_logging

from shared.logs import configure_logging
from shared.queue.celery_app import app
from shared.settings import get_settings


@setup_logging.connect
def _structlog(**_: Any) -> None:
    settings = get_settings()
    configure_logging(settings.log_level, settings.log_json)


def run_worker(concurrency: int, queues: str, loglevel: str) -> None:
    import workers.tasks  # noqa: F401  (registers the tasks)

    events = get_settings().task_events is not False
    app.worker_main([
        "worker", f"--concurrency={concurrency}", f"--queues={queues}", f"--loglevel={loglevel}",
        "--pool=prefork", *(["--task-events"] if events else []),
    ])


def run_beat(loglevel: str) -> None:
    app.start(["beat", f"--loglevel={loglevel}"])

"""Server-mode worker and beat processes."""

from __future__ import annotations

from typing import Any

from celery.signals import setup_logging

from shared.logs import configure_logging
from shared.queue.celery_app import app
from shared.settings import Settings, get_settings


@setup_logging.connect
def _structlog(**_: Any) -> None:
    settings = get_settings()
    configure_logging(settings.log_level, settings.log_json)


def worker_argv(concurrency: int, queues: str, loglevel: str, settings: Settings) -> list[str]:
    # Task events (Flower) are on in server mode unless MEMORYD_TASK_EVENTS=false.
    events = settings.task_events is not False
    return [
        "worker", f"--concurrency={concurrency}", f"--queues={queues}", f"--loglevel={loglevel}",
        "--pool=prefork", *(["--task-events"] if events else []),
    ]


def run_worker(concurrency: int, queues: str, loglevel: str) -> None:
    import workers.tasks  # noqa: F401  (registers the tasks)

    app.worker_main(worker_argv(concurrency, queues, loglevel, get_settings()))


def run_beat(loglevel: str) -> None:
    app.start(["beat", f"--loglevel={loglevel}"])

"""Server-mode worker and beat processes."""

from __future__ import annotations

from typing import Any

from celery.signals import setup_logging

from memoryd.platform.logs import configure_logging
from memoryd.platform.settings import Settings
from memoryd.workers.bootstrap import get_runtime
from memoryd.workers.celery_app import app


@setup_logging.connect
def _structlog(**_: Any) -> None:
    settings = get_runtime().settings
    configure_logging(settings.log_level, settings.log_json_choice)


def worker_argv(concurrency: int, queues: str, loglevel: str, settings: Settings,
                hostname: str | None = None) -> list[str]:
    # Task events (Flower) are on in server mode unless MEMORYD_TASK_EVENTS=false.
    events = settings.task_events is not False
    # Several workers on one host need distinct node names (Celery's -n), else they all
    # answer as celery@<host> to remote control and Flower.
    return [
        "worker", f"--concurrency={concurrency}", f"--queues={queues}", f"--loglevel={loglevel}",
        "--pool=prefork", *([f"--hostname={hostname}"] if hostname else []),
        *(["--task-events"] if events else []),
    ]


def run_worker(concurrency: int, queues: str, loglevel: str, hostname: str | None = None) -> None:
    import memoryd.workers.tasks  # noqa: F401  (registers the tasks)

    app.worker_main(worker_argv(concurrency, queues, loglevel, get_runtime().settings, hostname))


def run_beat(loglevel: str) -> None:
    app.start(["beat", f"--loglevel={loglevel}"])

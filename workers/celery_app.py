"""The worker processes' Celery app: tasks register on it (`workers/tasks.py`), and
`celery -A workers.celery_app:app` (workers, Flower) finds it here."""

from __future__ import annotations

from shared.jobs.celery_app import create_app
from shared.platform.settings import get_settings

app = create_app(get_settings())
# Retries are published through the current app; in a worker thread that would otherwise
# be Celery's unconfigured default app (an AMQP broker on localhost).
app.set_default()

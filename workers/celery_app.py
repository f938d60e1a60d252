"""The worker processes' Celery app: tasks register on it (`workers/tasks.py`), and
`celery -A memoryd.workers.celery_app:app` (workers, Flower) finds it here."""

from __future__ import annotations

from memoryd.jobs.celery_app import create_app
from memoryd.platform.settings import get_settings

app = create_app(get_settings())
# Retries are published through the current app; in a worker thread that would otherwise
# be Celery's unconfigured default app (an AMQP broker on localhost).
app.set_default()

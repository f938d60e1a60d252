"""Jobs: the Celery app, task and queue names, job state, enqueueing, failed jobs, forget
epochs. Shared by the gateway (which enqueues and reads) and the workers (which run)."""

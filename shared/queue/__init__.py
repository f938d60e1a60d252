"""Celery app, task and queue names, and job state: shared by the gateway and workers."""

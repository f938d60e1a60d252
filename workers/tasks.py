"""Celery tasks: each one names its command and the `shared/` function that carries it out."""

from __future__ import annotations

from functools import partial
from typing import Any

from celery import Celery

from memoryd.index import reindex
from memoryd.jobs import task_metrics
from memoryd.jobs.names import TaskName
from memoryd.memories import erasure, retention
from memoryd.memories.llm_extraction import extract_with_llm
from memoryd.memories.transfer import ImportCommand, run_import
from memoryd.memories.writes import MemoryWriter
from memoryd.records.commands import (
    DeleteCommand,
    ForgetCommand,
    IngestCommand,
    SaveCommand,
    UpdateCommand,
)
from memoryd.retrieval import access
from memoryd.workers.bootstrap import get_runtime
from memoryd.workers.celery_app import app
from memoryd.workers.llm_task import LLMTask
from memoryd.workers.task_base import MemoryTask, ReindexTask
from memoryd.workers.webhook_tasks import deliver_webhook  # noqa: F401  (registers webhook.deliver)

# Every worker process counts its task runs (shared/platform/metrics.py).
task_metrics.connect(lambda: get_runtime().redis)


@app.task(name=TaskName.INGEST.value, base=MemoryTask, bind=True)
def ingest(self: MemoryTask, command: dict[str, Any]) -> dict[str, Any]:
    return self.run_command(command, IngestCommand, MemoryWriter.ingest)


@app.task(name=TaskName.SAVE.value, base=MemoryTask, bind=True)
def save(self: MemoryTask, command: dict[str, Any]) -> dict[str, Any]:
    return self.run_command(command, SaveCommand, MemoryWriter.save)


@app.task(name=TaskName.UPDATE.value, base=MemoryTask, bind=True)
def update(self: MemoryTask, command: dict[str, Any]) -> dict[str, Any]:
    return self.run_command(command, UpdateCommand, MemoryWriter.update)


@app.task(name=TaskName.DELETE.value, base=MemoryTask, bind=True)
def delete(self: MemoryTask, command: dict[str, Any]) -> dict[str, Any]:
    return self.run_command(command, DeleteCommand, MemoryWriter.delete)


@app.task(name=TaskName.FORGET.value, base=MemoryTask, bind=True)
def forget(self: MemoryTask, command: dict[str, Any]) -> dict[str, Any]:
    return self.run_command(command, ForgetCommand, MemoryWriter.forget)


@app.task(name=TaskName.FLUSH_ACCESS.value, base=MemoryTask, bind=True, tracks_job=False)
def flush_access(self: MemoryTask) -> dict[str, Any]:
    rt = get_runtime()
    return access.flush_and_reschedule(
        rt.redis, rt.index.writing, rt.celery, rt.settings.search_access_flush_s
    )


@app.task(name=TaskName.REINDEX.value, base=ReindexTask, bind=True)
def reindex_begin(self: ReindexTask, command: dict[str, Any]) -> dict[str, Any]:
    with self.context(command):
        reindex.begin(get_runtime().reindexing, command)
    return {}


@app.task(name=TaskName.REINDEX_BATCH.value, base=ReindexTask, bind=True)
def reindex_batch(self: ReindexTask, step: dict[str, Any]) -> dict[str, Any]:
    with self.context(step):
        reindex.copy_batch(get_runtime().reindexing, step)
    return {}


@app.task(name=TaskName.REINDEX_SWITCH.value, base=ReindexTask, bind=True)
def reindex_switch(self: ReindexTask, step: dict[str, Any]) -> dict[str, Any]:
    with self.context(step):
        return reindex.switch(get_runtime().reindexing, step)


@app.task(name=TaskName.IMPORT.value, base=MemoryTask, bind=True)
def import_records(self: MemoryTask, command: dict[str, Any]) -> dict[str, Any]:
    return self.run_command(command, ImportCommand, run_import)


@app.task(name=TaskName.PURGE_EXPIRED.value, base=MemoryTask, bind=True, tracks_job=False)
def purge_expired(self: MemoryTask) -> dict[str, Any]:
    rt = get_runtime()
    return retention.purge_expired(rt.index, rt.redis, rt.settings, rt.erasure)


def _extract_llm(self: LLMTask, command: dict[str, Any]) -> dict[str, Any]:
    rt = get_runtime()
    extract = partial(extract_with_llm, client=rt.llm, judge_client=rt.judge_llm)
    return self.run_command(command, IngestCommand, extract)


def register_llm_tasks(celery: Celery) -> None:
    """LLM tasks on an app of their own: the embedded mode's second worker (inprocess.py)."""
    celery.task(name=TaskName.EXTRACT_LLM.value, base=LLMTask, bind=True)(_extract_llm)


extract_llm = app.task(name=TaskName.EXTRACT_LLM.value, base=LLMTask, bind=True)(_extract_llm)


# A compaction copies every live point, so it takes time in proportion to the store, not
# to one job: its own limits, not the per-job ones.
@app.task(name=TaskName.ERASE.value, base=MemoryTask, bind=True, tracks_job=False,
          soft_time_limit=3600, time_limit=3900)
def erase_forgotten(self: MemoryTask) -> dict[str, Any]:
    """Compact the store's and Redis's files when a forget happened since the last time."""
    return erasure.compact_if_due(get_runtime().erasure)

"""Celery tasks: each one names its command and the `shared/` function that carries it out."""

from __future__ import annotations

from typing import Any

from celery import Celery

from shared import access
from shared.commands import (
    DeleteCommand,
    ForgetCommand,
    IngestCommand,
    SaveCommand,
    UpdateCommand,
)
from shared.llm_extraction import extract_with_llm
from shared.queue.celery_app import app
from shared.queue.llm_task import LLMTask
from shared.queue.names import TaskName
from shared.queue.task_base import MemoryTask
from shared.runtime import get_runtime
from shared.writes import MemoryWriter


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
    return access.flush_and_reschedule(get_runtime())


def _extract_llm(self: LLMTask, command: dict[str, Any]) -> dict[str, Any]:
    return self.run_command(command, IngestCommand, extract_with_llm)


def register_llm_tasks(celery: Celery) -> None:
    """LLM tasks on an app of their own: the embedded mode's second worker (inprocess.py)."""
    celery.task(name=TaskName.EXTRACT_LLM.value, base=LLMTask, bind=True)(_extract_llm)


extract_llm = app.task(name=TaskName.EXTRACT_LLM.value, base=LLMTask, bind=True)(_extract_llm)

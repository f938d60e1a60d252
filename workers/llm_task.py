"""The base task for LLM work: the common policy, a rate limit, and `Retry-After` honoured."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memoryd.jobs.celery_app import TaskPolicy
from memoryd.memories.writes import MemoryWriter
from memoryd.platform.errors import LLMRateLimited
from memoryd.workers.task_base import C, MemoryTask


class LLMTask(MemoryTask):
    abstract = True
    # Per worker process (Celery's token bucket): N workers allow N times this. The app's
    # `TaskPolicy` sets it, before a worker of that app builds its buckets.
    rate_limit: str | None = None

    @classmethod
    def apply_policy(cls, policy: TaskPolicy) -> None:
        super().apply_policy(policy)
        cls.rate_limit = policy.llm_rate_limit

    def run_command(
        self,
        command: dict[str, Any],
        model: type[C],
        action: Callable[[MemoryWriter, C, str], dict[str, Any]],
    ) -> dict[str, Any]:
        try:
            return super().run_command(command, model, action)
        except LLMRateLimited as exc:
            if exc.retry_after_s is None:
                raise  # the base policy's exponential backoff
            # The provider said when: wait that long (capped by the backoff ceiling, which the
            # settings keep below the broker's visibility timeout).
            countdown = min(exc.retry_after_s, float(self.retry_backoff_max or 60))
            raise self.retry(exc=exc, countdown=countdown) from exc


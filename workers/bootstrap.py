"""The worker's composition root: the one `Runtime` of a worker process.

Task bodies (`workers/tasks.py`) and the task base classes reach the process's resources
through `get_runtime()`; the embedded stack installs its own runtime with `set_runtime`, so
its in-process worker and its gateway share one store.
"""

from __future__ import annotations

import threading

from memoryd.platform.settings import get_settings
from memoryd.runtime import Runtime
from memoryd.workers.celery_app import app

_runtime: Runtime | None = None
_lock = threading.Lock()


def get_runtime() -> Runtime:
    global _runtime
    if _runtime is None:
        with _lock:
            if _runtime is None:
                _runtime = Runtime(get_settings(), celery=app)
    return _runtime


def set_runtime(runtime: Runtime | None) -> None:
    global _runtime
    with _lock:
        _runtime = runtime

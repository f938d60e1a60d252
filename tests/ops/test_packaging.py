"""The installed import root is `memoryd` alone (docs/usage.md#import-paths).

The repository keeps shared/, api/ and workers/ at the top; pyproject.toml maps them to
`memoryd`, `memoryd.api` and `memoryd.workers`. Names such as `shared` and `api` are common in
application code, so a wheel that installed them would be shadowed by, or shadow, the user's
own. Here a regular (non-editable) wheel is built from the checkout's sources, installed into
a fresh venv, and used from an app directory that has its own `api/` and `shared/` packages.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.support.dockerfile import copied_sources

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CONFIG = PYPROJECT["tool"]["setuptools"]
DIST_INFO = f"memoryd-{PYPROJECT['project']['version']}.dist-info"
PACKAGE_DIR: dict[str, str] = CONFIG["package-dir"]


def dockerfile_sources() -> list[str]:
    """What ops/Dockerfile copies from the repository before it builds the wheel: the wheel
    below is built from exactly these, so a file the build needs (a license file, a
    package) that the image would lack fails here, not in a user's `docker build`. A
    wildcard ("README.md*": optional for the build) is taken as the file it names."""
    text = (ROOT / "ops" / "Dockerfile").read_text(encoding="utf-8")
    return sorted({source.rstrip("*") for source in copied_sources(text)})


SOURCES = dockerfile_sources()


def source_packages() -> dict[str, Path]:
    """Every package the mapping yields: its installed name -> its directory here."""
    found: dict[str, Path] = {}
    for name, folder in PACKAGE_DIR.items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            rel = init.parent.relative_to(base).parts
            found[".".join((name, *rel))] = init.parent
    return found


def package_directory(name: str) -> Path:
    """Where a listed package's files are in the repository, by the package-dir mapping."""
    root = max((n for n in PACKAGE_DIR if name == n or name.startswith(n + ".")), key=len)
    return ROOT / PACKAGE_DIR[root] / Path(*name[len(root):].split(".")[1:])


def test_pyproject_lists_every_package() -> None:
    # setuptools installs only the packages listed; a new directory with an __init__.py
    # works in an editable install and is missing from the wheel unless it is listed.
    listed = set(CONFIG["packages"])
    here = set(source_packages())
    assert sorted(here - listed) == [], "add these to [tool.setuptools] packages"
    # The rest are data directories (the admin page's), each with the files it ships.
    data = listed - here
    assert sorted(name for name in data if not package_directory(name).is_dir()) == [], (
        "listed in pyproject.toml, but no such directory")
    assert sorted(data - set(CONFIG["package-data"])) == [], (
        "a listed directory without __init__.py ships only its package-data")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a copy of what a clean clone has (no caches, no build/ leftovers,
    no egg-info), without build isolation: the running venv's setuptools (dev extra)."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=ignore)
        else:
            shutil.copy2(ROOT / name, src / name)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "--quiet", "--wheel-dir", str(work / "dist"), str(src)],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    (built,) = (work / "dist").glob("memoryd-*.whl")
    return built


def test_wheel_holds_memoryd_alone(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"memoryd", DIST_INFO}, tops
    # Every module of the repository, under its installed name, and the data files.
    expected = {
        "/".join((*name.split("."), py.name))
        for name, folder in source_packages().items()
        for py in folder.glob("*.py")
    }
    assert sorted(expected - set(names)) == []
    for data in ("memoryd/py.typed", "memoryd/embeddings/e5/kernels.c",
                 "memoryd/embeddings/e5/pieces.c", "memoryd/embeddings/e5/prefixes.c",
                 "memoryd/api/static/ui/index.html", "memoryd/api/static/ui/app.js"):
        assert data in names
    entry_points = zipfile.ZipFile(wheel).read(f"{DIST_INFO}/entry_points.txt").decode()
    assert "memoryd = memoryd.workers.cli:main" in entry_points


def test_wheel_states_its_license(wheel: Path) -> None:
    # An SPDX expression and the license files (core metadata 2.4): the form setuptools
    # keeps supporting, where a `license = { text = ... }` table only warns until it fails.
    metadata = zipfile.ZipFile(wheel).read(f"{DIST_INFO}/METADATA").decode().splitlines()
    assert "License-Expression: Apache-2.0" in metadata
    names = zipfile.ZipFile(wheel).namelist()
    for name in ("LICENSE", "NOTICE"):
        assert f"License-File: {name}" in metadata
        assert f"{DIST_INFO}/licenses/{name}" in names
    text = zipfile.ZipFile(wheel).read(f"{DIST_INFO}/licenses/LICENSE").decode()
    assert "Apache License" in text and "Version 2.0, January 2004" in text


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed. Its dependencies are the running venv's, made
    visible by a .pth line (a plain path: that directory's own .pth files, among them the
    editable install's finder, are not run), so nothing is downloaded."""
    path = tmp_path_factory.mktemp("venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True,
                   timeout=120)
    python = path / "bin" / "python"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--no-index", "--quiet", str(wheel)],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    site = Path(subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True).stdout.strip())
    (site / "_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return path


def site_packages(venv: Path) -> Path:
    (site,) = (venv / "lib").glob("python3*/site-packages")
    return site


def run(venv: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONNOUSERSITE"] = "1"
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_site_packages_has_memoryd_alone(venv: Path) -> None:
    # The venv started empty (no pip): everything here but our .pth came from the wheel.
    ours = {p.name for p in site_packages(venv).iterdir()} - {"_test_dependencies.pth"}
    assert ours == {"memoryd", DIST_INFO}, ours


# An application's own packages under the names the repository's directories have. (Their
# modules' names are not memoryd's own, so no rewrite of memoryd's imports touches them.)
APP = {
    "api/__init__.py": 'WHOSE = "the app\'s api"\n',
    "api/routes.py": 'ROUTES = "the app\'s own api.routes"\n',
    "shared/__init__.py": 'WHOSE = "the app\'s shared"\n',
    "shared/helpers.py": 'HELPER = "the app\'s own shared.helpers"\n',
    "workers/__init__.py": 'WHOSE = "the app\'s workers"\n',
    "main.py": textwrap.dedent('''
        import sys
        from pathlib import Path

        import api
        import api.routes
        import shared
        import workers
        from shared.helpers import HELPER

        HERE = Path(__file__).resolve().parent
        for module in (api, shared, workers):
            assert Path(module.__file__).resolve().is_relative_to(HERE), module.__file__
        assert api.WHOSE == "the app's api" and api.routes.ROUTES == "the app's own api.routes"
        assert shared.WHOSE == "the app's shared" and HELPER == "the app's own shared.helpers"

        # The documented imports (docs/usage.md#import-paths), from the wheel.
        import memoryd
        from memoryd.client import AsyncMemorydClient, MemorydClient, NotFound, RetryPolicy
        from memoryd.langgraph import MemorydStore, NamespaceError, StoreInputError
        from memoryd.mcp import Binding, JobLedger, build_server, serve_stdio
        from memoryd.records.schemas import JobView, MemoryView, SearchResponse
        import memoryd.api.app
        import memoryd.workers.cli

        site = Path(sys.argv[1]).resolve()
        assert Path(memoryd.__file__).resolve().is_relative_to(site), memoryd.__file__
        from langgraph.store.base import BaseStore
        assert issubclass(MemorydStore, BaseStore)
        import anyio
        server = build_server(lambda ctx: None, wait_s=0)
        assert "search_memories" in {t.name for t in anyio.run(server.list_tools)}
        # memoryd's own modules never reach the app's packages.
        assert sys.modules["shared"] is shared and sys.modules["api"] is api
        assert sys.modules["workers"] is workers
        assert not [n for n in sys.modules if n.startswith("memoryd.")
                    and not Path(sys.modules[n].__file__ or site).resolve().is_relative_to(site)]
        print("app ok")
        '''),
}


def test_app_with_its_own_api_and_shared(venv: Path, tmp_path: Path) -> None:
    app = tmp_path / "app"
    for name, text in APP.items():
        (app / name).parent.mkdir(parents=True, exist_ok=True)
        (app / name).write_text(text)
    done = run(venv, [str(venv / "bin" / "python"), "main.py", str(site_packages(venv))], app)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "app ok"


def test_memoryd_command(venv: Path, tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()  # an app's own shared/ in the working directory
    (tmp_path / "shared" / "__init__.py").write_text("raise ImportError('not ours')\n")
    done = run(venv, ["memoryd", "--help"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Usage: memoryd" in done.stdout and "mcp" in done.stdout
    as_module = run(venv, [str(venv / "bin" / "python"), "-m", "memoryd.workers.cli", "--help"],
                    tmp_path)
    assert as_module.returncode == 0, as_module.stderr[-3000:]

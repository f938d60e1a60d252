"""The import layers (pyproject.toml's import-linter contracts) are really checked, and no
module is imported under the repository's directory names.

lint-imports walks build/src/memoryd, the installed layout made of links
(ops/package_tree.py), since no directory is named memoryd: these tests run it on a copy of
the packages, once as they are and once with a deliberate violation, so a contract that no
longer matches any module (and so checks nothing) fails here.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ops.package_tree import build

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def copy_of_packages(tmp: Path) -> Path:
    root = tmp / "repo"
    root.mkdir()
    shutil.copy2(ROOT / "pyproject.toml", root)
    for package in ("shared", "api", "workers"):
        shutil.copytree(ROOT / package, root / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return root


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    build(root, root / "build" / "src")
    env = {**os.environ, "PYTHONPATH": str(root / "build" / "src")}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(("module", "line", "broken"), [
    (None, "", []),
    ("shared/platform/text_pace.py", "import memoryd.api.deps",
     ["memoryd's packages form layers"]),
    ("shared/records/identity.py", "import memoryd.jobs.names",
     ["memoryd's packages form layers"]),
    ("api/ui.py", "import memoryd.workers.tasks",
     ["memoryd's packages form layers", "the gateway and the workers are separate"]),
    ("shared/unplaced.py", "", ["memoryd's packages form layers"]),  # exhaustive
])
def test_contracts_are_checked(tmp_path: Path, module: str | None, line: str,
                               broken: list[str]) -> None:
    root = copy_of_packages(tmp_path)
    if module is not None:
        with (root / module).open("a") as f:
            f.write(f"\n{line}  # deliberate violation\n")
    done = lint_imports(root)
    output = done.stdout + done.stderr
    assert "Analyzed" in output, output[-3000:]
    if not broken:
        assert done.returncode == 0, output[-3000:]
        assert "BROKEN" not in output
        return
    assert done.returncode != 0, output[-3000:]
    for name in broken:
        assert any(name in row and "BROKEN" in row for row in output.splitlines()), output


def test_no_module_loads_under_a_directory_name() -> None:
    # From the repository root, `shared`, `api` and `workers` are importable as themselves
    # (the working directory is on sys.path): a reference left under those names would load
    # a second copy of a module, with its own settings and registries, and go unnoticed.
    code = """
import sys
import memoryd.api.app, memoryd.workers.cli, memoryd.workers.celery_app, memoryd.mcp
from memoryd.workers.celery_app import app
app.loader.import_default_modules()  # Celery's include=[...] by name
import memoryd.workers.tasks
stray = sorted(n for n in sys.modules if n.split(".")[0] in ("shared", "api", "workers"))
print(stray)
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


# The composition roots: the only modules that may read the process's settings
# (`get_settings()`). Everything else gets the Settings (or the values) it needs passed in,
# so a worker, gateway or test built with other Settings gets exactly those.
SETTINGS_ROOTS = frozenset({
    "workers/bootstrap.py",  # the worker process's Runtime
    "workers/celery_app.py",  # the worker process's Celery app (`celery -A`)
})


def settings_reads(source: str) -> list[int]:
    """The lines of `source` that call `get_settings()` (by name or as an attribute)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else (
                func.attr if isinstance(func, ast.Attribute) else None)
            if name == "get_settings":
                lines.append(node.lineno)
    return lines


def test_the_scan_finds_settings_reads() -> None:
    assert settings_reads("from x import get_settings\nlimit = get_settings().a\n") == [2]
    assert settings_reads("import x\n\n\ndef f():\n    return x.get_settings()\n") == [5]
    assert settings_reads("def get_settings():\n    return 1\n") == []


def test_only_composition_roots_read_the_process_settings() -> None:
    found = {}
    for package in ("shared", "api", "workers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            lines = settings_reads(path.read_text())
            if lines:
                found[name] = lines
    strays = {name: lines for name, lines in found.items() if name not in SETTINGS_ROOTS}
    assert not strays, f"get_settings() outside the composition roots: {strays}"
    # Each root still is one: an entry that no longer reads them would allow nothing.
    assert set(found) == SETTINGS_ROOTS

"""`ops.stack.Stack(root=...)` runs the code of the checkout it is given (the A/B bench's
`name@DIR=` configs), not the installed memoryd, which is this checkout's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from ops.stack import ROOT, checkout_code


def copy_checkout(dest: Path, pyproject: str | None = None) -> Path:
    dest.mkdir()
    if pyproject is None:
        shutil.copy2(ROOT / "pyproject.toml", dest)
    else:
        (dest / "pyproject.toml").write_text(pyproject)
    for package in ("shared", "api", "workers"):
        shutil.copytree(ROOT / package, dest / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def where(module: str, cwd: Path, env: dict[str, str]) -> Path:
    """The file `module` imports from, in a child run as the stack runs (cwd, env)."""
    done = subprocess.run(
        [sys.executable, "-c", f"import {module} as m; print(m.__file__)"],
        cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return Path(done.stdout.strip()).resolve()


def test_this_checkout_runs_the_installed_code() -> None:
    assert checkout_code(ROOT, ROOT / "unused") == ("memoryd.workers.cli", {})


def test_another_checkout_runs_its_own_code(tmp_path: Path) -> None:
    other = copy_checkout(tmp_path / "other")
    module, env = checkout_code(other, tmp_path / "tree")
    assert module == "memoryd.workers.cli"
    for name, folder in (("memoryd", "shared"), ("memoryd.api.app", "api"),
                         ("memoryd.workers.cli", "workers")):
        assert where(name, other, env).is_relative_to(other / folder), name


def test_a_checkout_from_before_the_namespace(tmp_path: Path) -> None:
    # No package-dir: its packages are top-level names, imported from its working directory.
    old = copy_checkout(tmp_path / "old", pyproject='[project]\nname = "memoryd"\n')
    module, env = checkout_code(old, tmp_path / "tree")
    assert module.split(".") == ["workers", "cli"] and env == {}
    assert where("workers", old, env).is_relative_to(old / "workers")

"""build/src/memoryd: the installed package's layout as links into the repository.

    python ops/package_tree.py        # ops/test.sh runs it before mypy and lint-imports

The repository keeps shared/, api/ and workers/ at the top; installed they are `memoryd`,
`memoryd.api` and `memoryd.workers` (`package-dir` in pyproject.toml, read here so the
mapping is written once). Python finds them through setuptools' editable finder, but mypy
and lint-imports (grimp) find modules by walking directories, and no directory is named
memoryd. This tree gives them one: build/src/memoryd holds a relative symbolic link to each
entry of shared/, plus `api` and `workers` linking to those directories, so the files they
read are the repository's own. Built anew on each run (cheap), into a temporary directory
that then replaces the old tree, so a package added since the last run is there too.

Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import os
import shutil
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / "build" / "src"
SKIP = {"__pycache__"}


def mapping(root: Path = ROOT) -> dict[str, Path]:
    """Package name -> its directory, from pyproject.toml's [tool.setuptools] package-dir."""
    config = tomllib.loads((root / "pyproject.toml").read_text())
    dirs: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    return {name: root / folder for name, folder in dirs.items()}


def build(root: Path = ROOT, tree: Path = TREE) -> Path:
    """Make `tree`/<top package> and return it. A package nested in another (memoryd.api in
    memoryd) becomes one link in its parent's directory; a name taken twice is an error."""
    packages = mapping(root)
    tops = {name for name in packages if "." not in name}
    if len(tops) != 1:
        raise SystemExit(f"expected one top-level package in package-dir, got {sorted(tops)}")
    top = tops.pop()
    work = tree.parent / f".{tree.name}.{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    for name in sorted(packages, key=lambda n: n.count(".")):
        source = packages[name]
        if not (source / "__init__.py").is_file():
            raise SystemExit(f"package-dir maps {name} to {source}, which has no __init__.py")
        target = work.joinpath(*name.split("."))
        if name == top:
            target.mkdir(parents=True)
            for entry in sorted(source.iterdir()):
                if entry.name not in SKIP:
                    _link(entry, target / entry.name)
        else:
            _link(source, target)
    if tree.is_symlink() or tree.is_file():
        tree.unlink()
    elif tree.exists():
        shutil.rmtree(tree)
    work.rename(tree)
    return tree / top


def _link(source: Path, link: Path) -> None:
    if link.exists() or link.is_symlink():
        raise SystemExit(f"{link.relative_to(link.parents[1])} is both a package-dir mapping "
                         f"and an entry of the parent package's directory")
    link.symlink_to(os.path.relpath(source, link.parent), target_is_directory=source.is_dir())


if __name__ == "__main__":
    built = build()
    print(f"{built.relative_to(ROOT)}: links to the repository's packages", file=sys.stderr)

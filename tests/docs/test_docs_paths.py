"""The documents under docs/ point only at things that exist: every relative link, and every
repository path they name (`shared/…`, `api/…`, `workers/…`, `ops/…`, `tests/…`), so a
moved module cannot leave a reader at a dead end. And docs/decisions/README.md indexes
every decision record."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
_REPO_PATH = re.compile(r"(?<![\w/.-])((?:shared|api|workers|ops|tests|examples)/[\w./*-]*\w/?)")


def _documents() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def dead_ends(document: Path) -> list[str]:
    text = document.read_text()
    missing = [f"link {target}" for target in _LINK.findall(text)
               if not target.startswith(("http://", "https://", "mailto:"))
               and not (document.parent / target).exists()]
    for path in _REPO_PATH.findall(text):
        if "*" in path:
            if not list(ROOT.glob(path.rstrip("/"))):
                missing.append(f"path {path}")
        elif not (ROOT / path.rstrip("/")).exists():
            missing.append(f"path {path}")
    return missing


def test_every_document_is_checked() -> None:
    names = {p.relative_to(DOCS).as_posix() for p in _documents()}
    assert {"architecture.md", "e5-engine.md", "decisions/README.md"} <= names


@pytest.mark.parametrize(
    "document", [pytest.param(p, id=p.relative_to(DOCS).as_posix()) for p in _documents()]
)
def test_every_link_and_repository_path_exists(document: Path) -> None:
    assert dead_ends(document) == []


def test_the_decisions_index_lists_every_record() -> None:
    index = (DOCS / "decisions" / "README.md").read_text()
    records = sorted(p.name for p in (DOCS / "decisions").glob("[0-9][0-9][0-9][0-9]-*.md"))
    assert records, "no decision records"
    assert [name for name in records if f"({name})" not in index] == []
    numbers = [name[:4] for name in records]
    assert len(set(numbers)) == len(numbers), "two records share a number"


def test_every_document_the_code_names_exists() -> None:
    # Docstrings point at the document or decision record that holds a measurement.
    named = {
        (source.relative_to(ROOT).as_posix(), doc)
        for package in ("shared", "api", "workers", "ops")
        for source in (ROOT / package).rglob("*")
        if source.suffix in (".py", ".c") and source.is_file()
        for doc in re.findall(r"docs/[\w/.-]*\w\.md", source.read_text())
    }
    assert named, "no source names a document"
    assert sorted((src, doc) for src, doc in named if not (ROOT / doc).exists()) == []

"""The TypeScript client (clients/typescript/): its generated types match the gateway's
current OpenAPI description, and its Node test suite passes against the session's live
stack (real gateway over HTTP, real Celery worker, real Qdrant Edge shard).

Needs `node` and `npm` (Node 20+); without them the tests skip and say so. The client's
dev dependencies (typescript, openapi-typescript) are installed with `npm ci` when
node_modules is missing (ops/test.sh does it up front).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY_A, KEY_B

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "clients" / "typescript"
NODE = shutil.which("node")
NPM = shutil.which("npm")
pytestmark = pytest.mark.skipif(
    NODE is None or NPM is None, reason="node and npm are not installed (Node 20+ is needed)")


def _run(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=CLIENT, capture_output=True, text=True, timeout=600,
                          check=False, **kwargs)


@pytest.fixture(scope="module")
def built() -> Path:
    """The client compiled with tsc into dist/ (npm ci first if node_modules is missing)."""
    assert NPM is not None
    if not (CLIENT / "node_modules" / ".bin" / "tsc").exists():
        installed = _run([NPM, "ci", "--no-audit", "--no-fund"])
        assert installed.returncode == 0, f"npm ci failed:\n{installed.stderr[-3000:]}"
    build = _run([NPM, "run", "--silent", "build"])
    assert build.returncode == 0, f"tsc failed:\n{build.stdout[-3000:]}{build.stderr[-3000:]}"
    compiled = CLIENT / "dist" / "test" / "client.test.js"
    assert compiled.exists()
    return compiled


def test_openapi_json_is_the_gateways_current_description() -> None:
    check = subprocess.run(
        [sys.executable, "-m", "ops.openapi", "--check", str(CLIENT / "openapi.json")],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert check.returncode == 0, check.stderr


def test_generated_types_match_openapi_json(built: Path) -> None:
    assert NPM is not None
    check = _run([NPM, "run", "--silent", "check-schema"])
    assert check.returncode == 0, (
        "src/schema.ts is not generated from openapi.json: run npm run generate in "
        f"clients/typescript\n{check.stdout[-2000:]}{check.stderr[-2000:]}")


def test_package_ships_the_projects_license() -> None:
    """What `npm pack` puts in the tarball carries the license its package.json names: the
    project's own LICENSE text, kept identical to the root copy."""
    assert NPM is not None
    assert (CLIENT / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()
    packed = _run([NPM, "pack", "--dry-run", "--json", "--ignore-scripts"])
    assert packed.returncode == 0, packed.stderr[-2000:]
    files = {f["path"] for f in json.loads(packed.stdout)[0]["files"]}
    assert {"LICENSE", "README.md", "package.json", "src/index.ts"} <= files


def _summary(tap: str) -> dict[str, int]:
    return {name: int(count) for name, count in re.findall(
        r"^# (tests|suites|pass|fail|cancelled|skipped|todo) (\d+)$", tap, re.MULTILINE)}


def test_node_suite_against_the_live_stack(built: Path, base_url: str) -> None:
    assert NODE is not None
    env = {**os.environ, "MEMORYD_URL": base_url, "MEMORYD_KEY": KEY_A, "MEMORYD_KEY_B": KEY_B}
    run = _run([NODE, "--test", "--test-reporter=tap", str(built)], env=env)
    summary = _summary(run.stdout)
    report = f"{run.stdout[-6000:]}\n{run.stderr[-2000:]}"
    assert run.returncode == 0, report
    assert summary.get("fail") == 0 and summary.get("cancelled") == 0, report
    # Nothing skipped: the live tests ran against this stack, not just the offline ones.
    assert summary.get("skipped") == 0, report
    assert summary.get("pass", 0) >= 17, report


def _snippet(document: Path, heading: str | None) -> str:
    """The first ```ts block of `document` (under `## heading` when given)."""
    text = document.read_text(encoding="utf-8")
    if heading is not None:
        text = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```ts\n(.*?)```", text, re.DOTALL)
    assert found, f"no ts snippet in {document}"
    return found.group(1)


@pytest.mark.parametrize(("document", "heading", "expected"), [
    (CLIENT / "README.md", None, "Lyon"),
    (ROOT / "docs" / "integrations.md", "TypeScript", "vegetarian"),
])
def test_documented_snippet_runs(built: Path, base_url: str, user: str, document: Path,
                                 heading: str | None, expected: str) -> None:
    """The snippets are plain JavaScript too: run as a module inside the package, where
    `@memoryd/client` resolves to the package itself (its `exports`)."""
    assert NODE is not None
    script = CLIENT / "dist" / f"snippet-{user}.js"
    script.write_text(_snippet(document, heading), encoding="utf-8")
    try:
        run = _run([NODE, str(script)], env={
            **os.environ, "MEMORYD_URL": base_url, "MEMORYD_API_KEY": KEY_A, "MEMORYD_USER": user})
    finally:
        script.unlink()
    assert run.returncode == 0, run.stderr
    assert expected in run.stdout, run.stdout
    assert "422 invalid_input top_k" in run.stdout, run.stdout

#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs the project and its dev tools into .venv,
# then ruff, mypy and pytest. Tests start their own Redis and stop it again.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv || {
        echo "python3 -m venv failed: install the venv module (Debian: apt-get install python3-venv)" >&2
        exit 1
    }
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'

# The admin page test drives Debian's chromium; install it when missing and we can (root,
# apt), with a CJK font so Chinese memories render in its screenshot. Once per machine; a
# machine without it skips that one test.
if [ ! -x /usr/bin/chromium ] && [ -z "${MEMORYD_NO_BROWSER_INSTALL:-}" ] \
        && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "installing chromium for the admin page test (MEMORYD_NO_BROWSER_INSTALL=1 skips)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends chromium fonts-wqy-microhei >/dev/null 2>&1 \
        || { apt-get update -q >/dev/null 2>&1 \
             && apt-get install -y -q --no-install-recommends chromium fonts-wqy-microhei >/dev/null 2>&1; } \
        || echo "could not install chromium: the admin page browser test will skip" >&2
fi

# The TypeScript client's dev tools (tsc, openapi-typescript) for tests/clients/, from its
# package-lock.json; a machine without npm skips those tests.
if command -v npm >/dev/null && [ ! -x clients/typescript/node_modules/.bin/tsc ]; then
    (cd clients/typescript && npm ci --no-audit --no-fund --silent) \
        || echo "npm ci failed in clients/typescript: its tests will try again" >&2
fi

.venv/bin/ruff check .
# mypy and lint-imports find modules by walking directories: build/src/memoryd is the
# installed layout (shared/ as memoryd, api/ and workers/ inside it) made of links.
.venv/bin/python ops/package_tree.py
.venv/bin/mypy
PYTHONPATH=build/src .venv/bin/lint-imports
# Every e5 model the suite runs (in the test processes, and in the stacks, workers and
# benches they start) keeps libgomp's threads asleep between its parallel regions: with
# the cores full, a spinning thread burns a core another process's model waits for
# (docs/decisions/0056-sleeping-openmp-threads-in-the-suite.md). The service keeps
# libgomp's default (decision 0004).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
# Three test processes (pytest-xdist), whole files to each. Most tests wait on a stack, a
# worker or a subprocess: with two, a 2-core host's cores sat idle a fifth of the run; a
# third process fills that (docs/decisions/0055-three-test-processes.md). The longest
# files go first (tests/conftest.py LONG_RUNNING), in that order.
# MEMORYD_TEST_PROCESSES=N runs N; 0 runs everything in this process.
exec .venv/bin/python -m pytest -n "${MEMORYD_TEST_PROCESSES:-3}" --dist loadfile --no-loadscope-reorder "$@"

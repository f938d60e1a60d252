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

.venv/bin/ruff check .
.venv/bin/mypy
exec .venv/bin/python -m pytest "$@"

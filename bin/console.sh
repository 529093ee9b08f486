#!/usr/bin/env bash
# The operator console. On a fresh clone it makes .venv and installs the project first, so that
# `bin/console.sh start --fresh` is all a new machine needs. Every argument goes to the click
# command line (`bin/console.sh help` lists the commands).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "console.sh: creating .venv" >&2
  "$PYTHON" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
fi

# (Re)install when the console script is missing or the packaging changed since it was written.
# The digest of the packaging goes where the console's `install` build step looks
# (console/build.py), so a `build` right after this finds the install up to date.
if [ ! -x .venv/bin/console ] || [ pyproject.toml -nt .venv/bin/console ]; then
  echo "console.sh: installing the project into .venv (first run, or pyproject.toml changed)" >&2
  .venv/bin/python -m pip install --quiet -e .
  touch .venv/bin/console
  cat pyproject.toml setup.cfg | sha256sum | cut -d' ' -f1 > .venv/.installed-console
fi

exec .venv/bin/console "$@"

#!/usr/bin/env bash
# Runs checkov, at the version every check uses, from a virtual environment of its own:
# checkov pins old versions of libraries that other checks' Python tools need.
#   scripts/checkov.sh ARGS...
set -euo pipefail
version=3.3.30
venv=${XDG_CACHE_HOME:-$HOME/.cache}/partner-intake/checkov-$version
if ! [ -x "$venv/bin/checkov" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "checkov==$version"
fi
exec "$venv/bin/checkov" "$@"

#!/usr/bin/env bash
# Create or update a virtual environment from a requirements file, then write its stamp file.
#   mkvenv.sh VENV_DIR REQUIREMENTS [--with-repo]
# --with-repo: also `pip install --no-deps -e .` (the verl environments: their pins must not be re-resolved).
# Make calls this only when the requirements file is newer than the stamp, so an up-to-date env costs nothing.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:?usage: mkvenv.sh VENV_DIR REQUIREMENTS [--with-repo]}
requirements=${2:?usage: mkvenv.sh VENV_DIR REQUIREMENTS [--with-repo]}
python=${PYTHON:-python3}

if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet -r "$requirements"
if [ "${3:-}" = --with-repo ]; then
    "$venv/bin/python" -m pip install --quiet --no-deps -e "$repo"
fi
date -u +%Y-%m-%dT%H:%M:%SZ >"$venv/.stamp"
echo "mkvenv: $venv up to date with $requirements"

#!/usr/bin/env bash
# Print the Python that host-side scripts use to ask the rlrecipes package about images and recipes, making
# the light host environment first when it is missing or older than pyproject.toml / requirements/host.txt.
#   host-python.sh                -> prints e.g. /path/to/repo/.venvs/host/bin/python
#   host-python.sh -m rlrecipes plan RECIPE   -> runs that Python with these arguments
# RLRECIPES_PYTHON set: that interpreter is used as is (it must import rlrecipes' dependencies).
# RLRECIPES_HOST_VENV: where the environment lives (default: <repo>/.venvs/host).
# No torch, no verl, no test tools: the test environment (.venvs/dev, `make env`) is never needed here.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
run() {
    if [ "$#" -gt 1 ]; then exec "$@"; fi
    printf '%s\n' "$1"
    exit 0
}
if [ -n "${RLRECIPES_PYTHON:-}" ]; then run "$RLRECIPES_PYTHON" "$@"; fi
venv=${RLRECIPES_HOST_VENV:-$repo/.venvs/host}
case "$venv" in /*) ;; *) venv="$PWD/$venv" ;; esac
stamp="$venv/.stamp"
if [ ! -f "$stamp" ] || [ "$repo/pyproject.toml" -nt "$stamp" ] || [ "$repo/requirements/host.txt" -nt "$stamp" ]; then
    python=${PYTHON:-python3}
    command -v "$python" >/dev/null || { echo "error: $python not found: the host side needs python3 (>= 3.10)" >&2; exit 2; }
    if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
        echo "error: $python cannot create virtual environments; install python3-venv (Debian/Ubuntu: apt-get install python3-venv)" >&2
        exit 2
    fi
    echo "host-python: making the light host environment $venv (the rlrecipes CLI, no torch)" >&2
    (cd "$repo" && PYTHON=$python scripts/mkvenv.sh "$venv" requirements/host.txt --with-repo) >&2
fi
run "$venv/bin/python" "$@"

#!/usr/bin/env bash
# Create or update a virtual environment from a requirements file, then write its stamp file.
#   mkvenv.sh VENV_DIR REQUIREMENTS [--with-repo]
# --with-repo: also `pip install --no-deps -e .` (the verl environments: their pins must not be re-resolved).
# Make calls this only when the requirements file is newer than the stamp, so an up-to-date env costs nothing.
# A `torch==X+cpu` pin is installed first, on its own, with the PyTorch CPU index as an extra index
# (TORCH_CPU_INDEX): PyPI's torch for Linux is the multi-GB CUDA build. Where that index is unreachable, a
# local wheel (pip's find-links, e.g. a CI machine's wheel cache) must provide it, else pip stops here, naming
# torch==X+cpu, instead of silently pulling the CUDA build. Only this one call sees the extra index, so an
# unreachable index costs pip's retries once, for torch alone.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:?usage: mkvenv.sh VENV_DIR REQUIREMENTS [--with-repo]}
requirements=${2:?usage: mkvenv.sh VENV_DIR REQUIREMENTS [--with-repo]}
python=${PYTHON:-python3}

if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
# MKVENV_UV=PATH (the Makefile sets it for the verl environments, whose requirements pin what pip and uv
# would otherwise resolve differently): install with uv's pip interface, which reads the same requirement
# files in seconds instead of minutes. uv reads no pip configuration, so pip's find-links (where a CI
# machine keeps its local torch wheel) are passed on. Without it, or where uv fails, pip does it all.
uv=${MKVENV_UV:-}
if [ -n "$uv" ] && [ ! -x "$uv" ]; then
    uv=
fi
find_links=()
for dir in ${PIP_FIND_LINKS:-} $("$venv/bin/python" -m pip config get global.find-links 2>/dev/null || true); do
    find_links+=(--find-links "$dir")
done
uv_install() {
    [ -n "$uv" ] && "$uv" pip install --quiet --python "$venv/bin/python" ${find_links[@]+"${find_links[@]}"} "$@"
}
torch_pin=$(grep -Eo '^torch==[^[:space:]#]+\+cpu' "$requirements" || true)
if [ -n "$torch_pin" ] && ! uv_install --compile-bytecode --no-deps "$torch_pin"; then
    # --no-deps: only torch itself is looked up on the extra index (an unreachable index then costs pip's
    # retries for one name, not for each of torch's dependencies); the -r install below brings those from PyPI.
    "$venv/bin/python" -m pip install --quiet --no-deps \
        --extra-index-url "${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}" "$torch_pin"
fi
# --compile-bytecode: uv, unlike pip, writes no .pyc at install time. Where PYTHONDONTWRITEBYTECODE is set (as on
# many CI machines and containers) Python then never caches one either, and every process that imports verl
# compiles torch, transformers and verl from source again (the cost is measured in docs/benchmarks.md, "CI time").
uv_install --compile-bytecode -r "$requirements" || "$venv/bin/python" -m pip install --quiet -r "$requirements"
if [ "${3:-}" = --with-repo ]; then
    uv_install --no-deps -e "$repo" || "$venv/bin/python" -m pip install --quiet --no-deps -e "$repo"
fi
date -u +%Y-%m-%dT%H:%M:%SZ >"$venv/.stamp"
echo "mkvenv: $venv up to date with $requirements"

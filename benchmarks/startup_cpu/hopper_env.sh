#!/usr/bin/env bash
# The Hopper image's Python set on a host without a GPU, for benchmarks/startup_cpu.sh VLLM=real: a Python 3.12
# virtual environment installed from docker/hopper.lock exactly as docker/hopper.Dockerfile installs it
# (scripts/install-lock.py: hashes, no resolver, the CUDA wheels included) with the image's verl edits
# (scripts/patch_verl.py --image hopper). About 11 GB. What it lacks beside the image: the CUDA base (driver
# libraries), so vLLM imports but finds no GPU. Usage (from the repository root):
#   bash benchmarks/startup_cpu/hopper_env.sh [DIR] [PYTHON]
# DIR: default /tmp/hopper-cpu. PYTHON: default python3.12 if it runs, else pyenv's 3.12 (~/.pyenv/versions/3.12.*).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
DIR=${1:-/tmp/hopper-cpu}; PY=${2:-}
if [ -z "$PY" ]; then
  PY=python3.12
  python3.12 -c '' 2>/dev/null || for PY in ~/.pyenv/versions/3.12.*/bin/python3.12; do :; done
fi
"$PY" -c 'import sys; assert sys.version_info[:2] == (3, 12), sys.version' \
  || { echo "$PY is not Python 3.12, the image's (docker/hopper.lock was resolved for it)" >&2; exit 2; }
[ -x "$DIR/bin/python" ] || "$PY" -m venv "$DIR"
"$DIR/bin/python" "$REPO/scripts/install-lock.py" "$REPO/docker/hopper.lock"
"$DIR/bin/python" "$REPO/scripts/patch_verl.py" --image hopper
"$DIR/bin/python" "$REPO/scripts/patch_verl.py" --image hopper --check
"$DIR/bin/python" -c "import importlib.metadata as m; print(*(f'{p} {m.version(p)}' for p in ('torch', 'vllm', 'verl', 'ray', 'transformers')), sep=', ')"

#!/usr/bin/env bash
# The `gpu` test tier inside an rlrecipes image, on a GPU host. The image's interpreter is the one with
# verl (and the P40 patch), so the GPU tests run instead of skipping as they do under `make test`.
# The checkout's tests/ is mounted over the image's copy of the repository; pytest (not part of the
# images) is installed once into .cache/test-gpu/<image>, which the container mounts and appends to
# sys.path, so the image's own packages keep precedence. A host without internet installs it from
# wheels: PYTEST_WHEELS=DIR (pytest, pluggy, iniconfig; + exceptiongroup, tomli for the py3.10 P40 image).
#   test-gpu.sh [PYTEST ARGS...]    environment: IMAGE_FAMILY (p40 default, a100, hopper), GPUS, PYTEST_WHEELS
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
family=${IMAGE_FAMILY:-p40}
case "$family" in
    a100) service=a100-grpo ;;
    hopper) service=hopper-grpo ;;
    p40) service=p40-ppo ;;
    *) echo "error: IMAGE_FAMILY=$family: choose p40, a100 or hopper" >&2; exit 2 ;;
esac
gpus=${GPUS:-all}
case "$gpus" in
    all | [1-9] | [1-9][0-9]) ;;
    *) echo "error: GPUS=$gpus: use GPUS=all or a number" >&2; exit 2 ;;
esac
command -v docker >/dev/null || { echo "error: docker not found; install Docker and the NVIDIA Container Toolkit" >&2; exit 2; }

cache="$repo/.cache/test-gpu/$family"
mkdir -p "$cache"
upper=$(printf '%s' "$family" | tr '[:lower:]' '[:upper:]')
args=(--rm --no-deps -T -e RLRECIPES_REQUIRE_GPU=1 -v "$repo/tests:/opt/rlrecipes/tests:ro" -v "$cache:/opt/pytest")
if [ -n "${PYTEST_WHEELS:-}" ]; then
    args+=(-v "$(cd "$PYTEST_WHEELS" && pwd):/opt/pytest-wheels:ro" -e PIP_NO_INDEX=1 -e PIP_FIND_LINKS=/opt/pytest-wheels)
fi
# Inside the container: "$@" are the pytest arguments given to this script.
# shellcheck disable=SC2016  # single quotes on purpose: $-expressions expand in the container, not here
script='set -e
if [ ! -d /opt/pytest/_pytest ]; then python -m pip install --quiet --target /opt/pytest "pytest>=8"; fi
cd /opt/rlrecipes
exec python -c "import sys; sys.path.append(\"/opt/pytest\"); import pytest; sys.exit(pytest.main(sys.argv[1:]))" \
    -p no:cacheprovider -m gpu tests/smoke/test_smoke_gpu.py "$@"'
exec env "${upper}_GPUS=$gpus" docker compose -f "$repo/compose.yaml" run "${args[@]}" --entrypoint bash "$service" \
    -c "$script" test-gpu "$@"

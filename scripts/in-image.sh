#!/usr/bin/env bash
# Run an entry-point stage where it belongs: directly when already inside an rlrecipes image
# (RLRECIPES_IN_IMAGE=1), else in the recipe's image with `docker run` (GPUs, shm, memlock, the volumes).
#   in-image.sh STAGE [ARGS...]        environment: RECIPE, PROFILE, GPUS (docker --gpus value), SHM_SIZE
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
stage=${1:?usage: in-image.sh STAGE [ARGS...]}
shift

if [ "${RLRECIPES_IN_IMAGE:-0}" = 1 ]; then
    exec "$repo/scripts/entrypoint.sh" "$stage" "$@"
fi

: "${RECIPE:?set RECIPE (make sets it; see make help)}"
: "${PROFILE:=}"
command -v docker >/dev/null || { echo "error: docker not found; install Docker and the NVIDIA Container Toolkit" >&2; exit 2; }

# The recipe engine needs PyYAML: the light host environment (scripts/host-python.sh) has it, torch-free.
if [ -z "${IMAGE:-}" ]; then python=$("$repo/scripts/host-python.sh"); fi
image=${IMAGE:-$("$python" -c 'import sys
from rlrecipes.recipe import resolve
print(resolve(sys.argv[1], profile=sys.argv[2] or None, overrides=[]).image.tag)' "$RECIPE" "$PROFILE")}

# The same named volumes as compose.yaml (project name "rlrecipes"), so make and compose share state.
# --stop-timeout: `docker stop` waits this long before SIGKILL (default 10 s), so the launcher's stop guard can
# let a checkpoint save in flight finish (rlrecipes/verl/stopguard.py waits up to 100 s), as compose.yaml's
# stop_grace_period does.
args=(--rm --shm-size "${SHM_SIZE:-16g}" --stop-timeout "${STOP_TIMEOUT:-120}"
      --ulimit memlock=-1 --ulimit stack=67108864
      -e RECIPE="$RECIPE" -e PROFILE="$PROFILE"
      -v rlrecipes_data:/workspace/data -v rlrecipes_models:/workspace/models
      -v rlrecipes_checkpoints:/workspace/checkpoints -v rlrecipes_hf-cache:/workspace/hf-cache
      -v rlrecipes_logs:/workspace/logs)
# GPUS=none runs a CPU-only stage (report) in the image on a host without the NVIDIA runtime.
if [ "${GPUS:-all}" != none ]; then args+=(--gpus "${GPUS:-all}"); fi
# Reports land on the host, beside the repository.
if [ "$stage" = report ]; then mkdir -p "$repo/reports"; args+=(-v "$repo/reports:/workspace/reports"); fi
if [ -f "$repo/.env" ]; then args+=(--env-file "$repo/.env"); fi
if [ -t 0 ] && [ -t 1 ]; then args+=(-it); fi

exec docker run "${args[@]}" "$image" "$stage" "$@"

#!/usr/bin/env bash
# Run an entry-point stage where it belongs: directly when already inside an rlrecipes image
# (RLRECIPES_IN_IMAGE=1), else in the recipe's image through `docker compose run --rm`, so compose.yaml is the
# one definition of a stage's container (image, GPUs, shm, ulimits, volumes, .env, stop grace period).
#   in-image.sh STAGE [ARGS...]        environment: RECIPE, PROFILE, GPUS (all, a count, or none), IMAGE
# Services: a100-grpo, hopper-grpo, p40-ppo reserve GPUs and start the watchdog first (run, train, resume);
# their <image>-cpu twins run the stages that need no GPU (GPUS=none: data, model, report).
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

# The recipe engine picks the image family (a100, p40); the light host environment has it, torch-free.
python=$("$repo/scripts/host-python.sh")
family=$("$python" -c 'import sys
from rlrecipes.recipe.load import resolve
print(resolve(sys.argv[1], profile=sys.argv[2] or None, overrides=[]).image.name)' "$RECIPE" "$PROFILE")

gpus=${GPUS:-all}
case "$family:$gpus" in
    *:none) service=$family-cpu ;;
    a100:*) service=a100-grpo ;;
    hopper:*) service=hopper-grpo ;;
    p40:*) service=p40-ppo ;;
    *) echo "error: compose.yaml has no service for image '$family'" >&2; exit 2 ;;
esac
upper=$(printf '%s' "$family" | tr '[:lower:]' '[:upper:]')
env_args=()
if [ "$gpus" != none ]; then
    case "$gpus" in
        all | [1-9] | [1-9][0-9]) env_args+=("${upper}_GPUS=$gpus") ;;  # compose.yaml: count: ${A100_GPUS:-all}
        *) echo "error: GPUS=$gpus: compose reserves GPUs by count; use GPUS=all or a number (or CUDA_VISIBLE_DEVICES" \
                "in .env to pick devices)" >&2; exit 2 ;;
    esac
fi
if [ -n "${IMAGE:-}" ]; then env_args+=("${upper}_IMAGE=$IMAGE"); fi

args=(--rm -e RECIPE="$RECIPE" -e PROFILE="$PROFILE")
# Training stages wait for a healthy watchdog (compose.yaml depends_on); the others do not start it.
case "$stage" in run | train | resume | reproduce) ;; *) args+=(--no-deps) ;; esac
# Reports land on the host, beside the repository.
if [ "$stage" = report ] || [ "$stage" = reproduce ]; then mkdir -p "$repo/reports"; args+=(-v "$repo/reports:/workspace/reports"); fi
if ! { [ -t 0 ] && [ -t 1 ]; }; then args+=(-T); fi

exec env ${env_args[@]+"${env_args[@]}"} docker compose -f "$repo/compose.yaml" run "${args[@]}" "$service" "$stage" "$@"

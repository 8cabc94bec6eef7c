#!/usr/bin/env bash
# Build one image from docker/<name>.Dockerfile, tagged as rlrecipes/recipe/images.py says.
#   build-image.sh a100|hopper|p40|watchdog [--standin] [--runpod] [extra docker build args...]
# --standin: CI mode against the stand-in base images (scripts/ci/standin-bases.sh): no GPU wheels, the
# base's own Python; tagged rlrecipes/<name>:standin so it can never be mistaken for the real image.
# --runpod (a100, hopper): on RunPod's PyTorch base (rlrecipes/recipe/images.py RUNPOD_BASES), whose /start.sh gives SSH
# and Jupyter on a pod; tagged <tag>-runpod.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
name=${1:?usage: build-image.sh a100|hopper|p40|watchdog [--standin] [docker build args...]}
shift
standin=0
runpod=0
while [ "$#" -gt 0 ]; do
    case "$1" in
        --standin) standin=1; shift ;;
        --runpod) runpod=1; shift ;;
        *) break ;;
    esac
done
case "$runpod:$name" in 1:a100|1:hopper|0:*) ;; *) echo "error: --runpod is for the a100 and hopper images" >&2; exit 2 ;; esac

dockerfile="$repo/docker/$name.Dockerfile"
[ -f "$dockerfile" ] || { echo "error: no $dockerfile (images: a100, hopper, p40, watchdog)" >&2; exit 2; }

case "$name" in
    watchdog) tag="rlrecipes/watchdog:py3.12" ;;
    # rlrecipes/recipe/images.py is stdlib only: any python3 reads it, no environment needed.
    *) tag=$(PYTHONPATH="$repo" "${RLRECIPES_PYTHON:-python3}" -c 'import sys; from rlrecipes.recipe.images import IMAGES; print(IMAGES[sys.argv[1]].tag)' "$name") ;;
esac

args=()
if [ "$runpod" = 1 ]; then
    base=$(PYTHONPATH="$repo" "${RLRECIPES_PYTHON:-python3}" -c 'import sys; from rlrecipes.recipe.images import RUNPOD_BASES; print(RUNPOD_BASES[sys.argv[1]])' "$name")
    tag="$tag-runpod"
    args+=(--build-arg PYTHON_SOURCE=base)
else
    base=$(sed -n 's/^ARG BASE_IMAGE=//p' "$dockerfile" | head -n 1)
fi
# The base by digest when docker/bases.lock pins it (`make lock`); CI's stand-in bases exist only by tag.
if [ "$standin" = 0 ] && [ -n "${base:-}" ]; then
    base=$("${RLRECIPES_PYTHON:-python3}" "$repo/scripts/lock_sources.py" pinned-base "$base")
fi
if [ -n "${base:-}" ]; then args+=(--build-arg "BASE_IMAGE=$base"); fi
if [ "$standin" = 1 ]; then
    tag="rlrecipes/$name:standin"
    if [ "$runpod" = 1 ]; then tag="$tag-runpod"; fi
    args+=(--build-arg SKIP_GPU_WHEELS=1 --build-arg PYTHON_SOURCE=base)
fi

# The daemon's own BuildKit (cache mounts) without needing the buildx plugin on older CLIs.
export DOCKER_BUILDKIT=1
echo "build-image: $tag from docker/$name.Dockerfile" >&2
exec docker build -f "$dockerfile" -t "$tag" "${args[@]}" "$@" "$repo"

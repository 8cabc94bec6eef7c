#!/usr/bin/env bash
# Fail fast, with a pointer to what does run here, when a target that needs an NVIDIA GPU runs on a host
# without one. Usage: require-gpu.sh WHAT [IMAGE]   (WHAT names the target in the message; IMAGE, for a
# build target, names the image whose CI stand-in build does run here)
set -euo pipefail

what=${1:-this target}
image=${2:-}
if command -v nvidia-smi >/dev/null 2>&1 && timeout 10 nvidia-smi -L >/dev/null 2>&1; then
    exit 0
fi
cat >&2 <<MSG
error: \`make ${what}\` needs a host with an NVIDIA GPU and driver ($(command -v nvidia-smi >/dev/null 2>&1 && echo "\`nvidia-smi -L\` failed" || echo "\`nvidia-smi\` is not installed") here).
  On this host you can still run:
    make plan       resolved plan: image, GPUs, batch arithmetic, checkpoints, launch command
    make validate   the recipe against the real schema of its verl version (CPU)
    make test       the CPU test suite (add RLRECIPES_REQUIRE_DOCKER=1 to build stand-in images too)
MSG
if [ -n "$image" ]; then
    echo "  A CI-style $image image without the GPU wheels builds here with: scripts/build-image.sh $image --standin" >&2
fi
exit 3

#!/usr/bin/env bash
# Build stand-in base images for CI, where no container registry is reachable: one Debian bookworm rootfs
# (debootstrap, python3 + pip + venv, the host's extra CA certificates so pip inside reaches the package
# index), imported once and tagged as every base name our Dockerfiles use. They let `docker build` run the
# non-GPU part of each Dockerfile for real; they are not CUDA images (docs/images.md says what that means).
# Usage: standin-bases.sh CACHE_DIR   (needs DOCKER_HOST pointing at a running daemon; run as root)
set -euo pipefail

cache=${1:?usage: standin-bases.sh CACHE_DIR}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
tarball="$cache/bookworm-rootfs.tar"
suite=${STANDIN_SUITE:-bookworm}
mirror=${STANDIN_MIRROR:-http://deb.debian.org/debian}
# Every FROM in docker/*.Dockerfile. tests/support/docker.py checks this list covers them.
TAGS=(
    "nvidia/cuda:12.8.1-cudnn-devel-ubuntu22.04"
    "nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04"
    "nvidia/cuda:13.0.2-cudnn-devel-ubuntu24.04"
    "python:3.12-slim"
    "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404"
)

if [ ! -s "$tarball" ]; then
    rootfs="$cache/rootfs.tmp"
    rm -rf "$rootfs"
    debootstrap --variant=minbase --include=python3,python3-pip,python3-venv,ca-certificates \
        "$suite" "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 \
        || { tail -n 30 "$cache/debootstrap.log" >&2; exit 1; }
    if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
        cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
        chroot "$rootfs" update-ca-certificates >/dev/null
    fi
    # Keep the image small: apt lists and caches are not needed by `docker build`.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
    rm -rf "$rootfs"
fi

first=${TAGS[0]}
if ! docker image inspect "$first" >/dev/null 2>&1; then
    docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["/bin/bash"]' \
        "$tarball" "$first" >/dev/null
fi
for tag in "${TAGS[@]:1}"; do
    docker tag "$first" "$tag"
done
echo "stand-in bases ready: ${TAGS[*]}"

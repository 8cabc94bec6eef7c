#!/usr/bin/env bash
# Install the system packages the docker-marked tests need (a Docker daemon, iptables for its bridge,
# debootstrap for stand-in base images, filesystem tools for size-capped volumes, Slurm and munge for the
# private Slurm cluster that runs the docs' sbatch commands, chromium for the report's browser test). Idempotent: packages
# already present are not re-downloaded, so a second run costs a dpkg query.
set -euo pipefail

PACKAGES=(docker.io iptables debootstrap e2fsprogs btrfs-progs ca-certificates slurm-wlm munge chromium)

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-system-deps: all present (${PACKAGES[*]})"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "install-system-deps: need root to install: ${missing[*]}" >&2
    exit 1
fi

echo "install-system-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"

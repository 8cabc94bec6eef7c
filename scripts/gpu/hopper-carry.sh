#!/usr/bin/env bash
# Hopper stack on the lent H200, one call per bundle part: copy the part carried in .whl/ (with the
# manifest) to /root/bundle, outside the repository copy (carried paths are replaced at every call),
# and verify what has arrived so far. Usage: bash scripts/gpu/hopper-carry.sh
set -euo pipefail
mkdir -p /root/bundle
cp .whl/manifest.json .whl/wheels.tar.part-* /root/bundle/
python3 scripts/wheel_bundle.py check /root/bundle || true

#!/usr/bin/env bash
# Hopper stack on the lent H200, one call per bundle part: copy the part carried in BUNDLE_SRC (default .whl/,
# with the manifest) to /root/bundle, outside the repository copy (carried paths are replaced at every call),
# and verify what has arrived so far. Usage: [BUNDLE_SRC=bundle] bash benchmarks/gpu/bundle_carry_part.sh
set -euo pipefail
src="${BUNDLE_SRC:-.whl}"
mkdir -p /root/bundle
cp "$src"/manifest.json "$src"/wheels.tar.part-* /root/bundle/
python3 scripts/wheel_bundle.py check /root/bundle || true

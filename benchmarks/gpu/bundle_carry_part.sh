#!/usr/bin/env bash
# Hopper stack on the H200 host (offline), once per bundle part: copy the part brought over in BUNDLE_SRC
# (default .whl/, with the manifest) to /root/bundle, outside the repository copy (the repository is copied over
# afresh with each part, BUNDLE_SRC included), and verify what has arrived so far.
# Usage: [BUNDLE_SRC=bundle] bash benchmarks/gpu/bundle_carry_part.sh
set -euo pipefail
src="${BUNDLE_SRC:-.whl}"
mkdir -p /root/bundle
cp "$src"/manifest.json "$src"/wheels.tar.part-* /root/bundle/
python3 scripts/wheel_bundle.py check /root/bundle || true

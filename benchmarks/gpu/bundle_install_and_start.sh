#!/usr/bin/env bash
# Hopper stack on the lent H200, after the last part arrived: install the bundle into /root/site, record
# the versions, then start benchmarks/gpu/smoke_hopper_stack.sh in its own session (it outlives this call while the
# machine stays warm) and follow it with job_follow.sh until this call's time is nearly up.
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
bash benchmarks/gpu/bundle_carry_part.sh
rm -rf /root/repo && mkdir -p /root/repo && cp -a . /root/repo/ && rm -rf /root/repo/.whl /root/repo/bundle
T0=$(date +%s)
python3 /root/repo/scripts/wheel_bundle.py install /root/bundle --target /root/site || exit 1
echo "install: $(( $(date +%s) - T0 )) s"
mkdir -p /root/w/out
setsid nohup bash "/root/repo/${JOB:-benchmarks/gpu/smoke_hopper_stack.sh}" > /root/w/out/job.log 2>&1 < /dev/null &
bash benchmarks/gpu/job_follow.sh "${1:-480}"

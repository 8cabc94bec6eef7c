#!/usr/bin/env bash
# Hopper stack on the H200 host (offline), after the last part arrived: install the bundle into /root/site,
# record the versions, then start JOB (default benchmarks/gpu/smoke_hopper_stack.sh) in its own session (it
# outlives this script while the host stays up) and follow it with job_follow.sh for at most $1 seconds
# (default 480); job_follow.sh packs the results into RESULTS (default /tmp/results).
set -uo pipefail
RESULTS="${RESULTS:-/tmp/results}"; mkdir -p "$RESULTS"
bash benchmarks/gpu/bundle_carry_part.sh
rm -rf /root/repo && mkdir -p /root/repo && cp -a . /root/repo/ && rm -rf /root/repo/.whl /root/repo/bundle
mkdir -p /root/w/out
T0=$(date +%s)
python3 /root/repo/scripts/wheel_bundle.py install /root/bundle --target /root/site || exit 1
echo "install: $(( $(date +%s) - T0 )) s" | tee /root/w/out/install.txt
# the image's pip install writes every module's bytecode; the bundle installs with --no-compile, so without this the
# host's first launch would compile what it imports, a cost the image does not have
T1=$(date +%s); python3 -m compileall -q -j 0 /root/site > /dev/null 2>&1
echo "bytecode: $(( $(date +%s) - T1 )) s" | tee -a /root/w/out/install.txt
setsid nohup bash "/root/repo/${JOB:-benchmarks/gpu/smoke_hopper_stack.sh}" > /root/w/out/job.log 2>&1 < /dev/null &
bash benchmarks/gpu/job_follow.sh "${1:-480}"

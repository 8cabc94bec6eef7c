#!/usr/bin/env bash
# Follow the detached job (smoke_hopper_stack.sh, startup_levers.sh, recovery_faults.sh, ...) for at most $1
# seconds (default 540); then pack its results into RESULTS (default /tmp/results): one tarball of logs and JSON
# (no weights, no data) and the timeline beside it, and the relay of each seed run not ended yet (relay.sh).
# Usage: bash benchmarks/gpu/job_follow.sh 540
set -uo pipefail
RESULTS="${RESULTS:-/tmp/results}"; mkdir -p "$RESULTS"
LIMIT="${1:-540}"; T0=$(date +%s)
# a host that is not the one the job was started on (or was restarted since) has no job, nor has one whose
# install failed (bundle_install_and_start.sh stops before the job): say so at once instead of waiting out LIMIT
[ -d /root/w/out ] || { echo "no job on this host: it is a fresh one (the job's host is gone)"; exit 3; }
[ -f /root/w/out/job.log ] || [ -f /root/w/out/timeline.txt ] \
  || { echo "no job on this host: none was started (see the install's output)"; exit 3; }
while [ ! -f /root/w/out/DONE ] && [ $(( $(date +%s) - T0 )) -lt "$LIMIT" ]; do sleep 10; done
cat /root/w/out/timeline.txt 2>/dev/null
cp /root/w/out/timeline.txt "$RESULTS/" 2>/dev/null
# torch profiler traces (startup_levers.sh's `profile` levers): read (read_traces.sh) before the tarball is packed, so
# that their readings and slim copies travel in it; the traces themselves beside it, in a tar of their own
traces=$(cd /root/w 2>/dev/null && find out -path '*/trace/*.json.gz' 2>/dev/null | sort)
[ -z "$traces" ] || bash benchmarks/gpu/read_traces.sh > "$RESULTS/torch-trace.txt" 2>&1
# the lever launches' and the seed runner's controls' log folders too: a launch the job has not finished has its
# console log and metrics only there
logs=(); for d in smoke-grpo-lora/logs smoke-ppo/logs fit/logs fit-variant/logs faults/logs seeds/logs \
  $(cd /root/w 2>/dev/null && ls -d levers/logs-* seeds/control-*/logs 2>/dev/null); do
  [ -d "/root/w/$d" ] && logs+=("$d")
done
tar -czf "$RESULTS/hopper-logs.tgz" -C /root/w --exclude='*.safetensors' --exclude='*.pt' --exclude='*.parquet' \
  --exclude='*.bin' --exclude='assets' --exclude='merged' --exclude='adapter' --exclude='trace' \
  out "${logs[@]}" 2>/dev/null
# a seed run not ended yet: its last checkpoint and logs, for the next sitting to go on from (relay.sh)
bash benchmarks/gpu/relay.sh pack "$RESULTS"
if [ -n "$traces" ]; then
  # shellcheck disable=SC2086  # one path a word
  tar -cf "$RESULTS/profile-traces.tar" -C /root/w $traces
  [ "$(stat -c %s "$RESULTS/profile-traces.tar")" -le $((40 * 1024 * 1024)) ] \
    || { echo "profile-traces.tar over 40 MiB: left on the host, torch-trace.txt holds its figures"
         rm -f "$RESULTS/profile-traces.tar"; }
fi
[ -f /root/w/out/DONE ] && echo "job finished" || echo "job still running after ${LIMIT}s"
for f in /root/w/out/phase-peaks.txt /root/w/out/vllm-alone-*.json /root/w/out/gen-split.json \
         /root/w/out/variant/gen-split.json; do [ -f "$f" ] && { echo "== $f"; cat "$f"; }; done
grep -h "^step:" /root/w/out/verl-fit.log 2>/dev/null | tail -3 | cut -c1-1500
for f in /root/w/*/reproduce.log; do [ -f "$f" ] && { echo "== $f"; grep -a "^\[reproduce\]" "$f" | tail -8; }; done
grep -ah "step:[0-9]" /root/w/*/logs/*/console-*.log 2>/dev/null | tail -2 | cut -c1-700
tail -n 12 /root/w/out/job-driver.log 2>/dev/null
tail -n 30 /root/w/out/job.log
tail -n 25 /root/w/out/verl-fit.log 2>/dev/null

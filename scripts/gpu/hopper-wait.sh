#!/usr/bin/env bash
# Follow scripts/gpu/hopper-job.sh for at most $1 seconds (default 540); then pack its results into
# $OUT (one tarball of logs and JSON, the summaries beside it). Usage: bash scripts/gpu/hopper-wait.sh 540
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
LIMIT="${1:-540}"; T0=$(date +%s)
while [ ! -f /root/w/out/DONE ] && [ $(( $(date +%s) - T0 )) -lt "$LIMIT" ]; do sleep 10; done
cat /root/w/out/timeline.txt 2>/dev/null
for f in /root/w/out/*.json /root/w/out/*.txt; do [ -f "$f" ] && cp "$f" "$OUT/"; done
tar -czf "$OUT/hopper-logs.tgz" -C /root/w --exclude='*.safetensors' --exclude='*.pt' --exclude='*.parquet' \
  --exclude='*.bin' --exclude='assets' --exclude='merged' out smoke-grpo-lora/logs smoke-ppo/logs 2>/dev/null
[ -f /root/w/out/DONE ] && echo "job finished" || echo "job still running after ${LIMIT}s"
tail -n 40 /root/w/out/job.log

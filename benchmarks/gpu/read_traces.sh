#!/usr/bin/env bash
# GPU host: each torch profiler trace under /root/w/out (startup_levers.sh's `profile` and `profile-stack`: gzipped,
# 164 MB with Python's stacks) read once by torch_trace.py, its reading (<trace>.trace.txt) and slim copy
# (<trace>.slim.json.gz, the stages' figures in under 1 MB) written beside the lever's logs, outside the trace
# folder, so that they travel in job_follow.sh's tarball when the trace itself is too large to. Prints every
# trace's reading. Run by startup_levers.sh after each launch and by job_follow.sh before it packs.
set -uo pipefail
cd /root/w 2>/dev/null || exit 0
for t in $(find out -path '*/trace/*.json.gz' 2>/dev/null | sort); do
  base="/root/w/${t%/trace/*}/$(basename "$t" .json.gz)"
  echo "== $t ($(stat -c %s "$t") bytes)"
  if [ ! -f "$base.trace.txt" ]; then  # written whole or not at all: a reading cut short is read again next time
    python3 /root/repo/benchmarks/gpu/torch_trace.py "$t" --top 12 --slim "$base.slim.json.gz" \
      > "$base.trace.txt.$$" 2>&1 && mv "$base.trace.txt.$$" "$base.trace.txt"
    [ -f "$base.trace.txt" ] || { cat "$base.trace.txt.$$"; rm -f "$base.trace.txt.$$"; continue; }
  fi
  cat "$base.trace.txt"
done

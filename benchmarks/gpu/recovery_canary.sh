#!/usr/bin/env bash
# GPU: the learning canary stopped and started again with the user's own command (docs/bench/gpu-reliability.md).
# `make reproduce RECIPE=canary-grpo-lora PROFILE=any-1gpu-hopper ARGS=trainer.save_freq=10`, inside the image's
# environment (RLRECIPES_IN_IMAGE=1: the entry point runs directly), from an empty directory, three times:
#
#   1  SIGTERM to the reproduce process (what `docker stop` reaches through tini) once step STOP_STEP is logged:
#      mid-step, the checkpoint of step 10 whole. Expected: the stage ends 143 with one line saying where the same
#      command goes on, reproduce.json says `interrupted` with checkpoint 10, no native abort trace, no Ray or
#      vLLM process left, the GPU free.
#   2  the same command; SIGKILL to its whole process group the moment a checkpoint directory above the tracker
#      appears (a save being written). Expected: nothing of the run left running, the GPU free, the checkpoint
#      the tracker names whole.
#   3  the same command, to the verdict. Expected: training resumes from the last whole checkpoint, the run
#      finishes, `expect` says met.
#
# save_freq=10 (the shipped 30 would put the stops between far-apart checkpoints); everything else as shipped.
# Run detached on the GPU host after the offline bundle is installed in /root/site and the repository copied to
# /root/repo (benchmarks/gpu/bundle_install_and_start.sh with JOB=benchmarks/gpu/recovery_canary.sh); follow it
# with benchmarks/gpu/job_follow.sh. Everything it records lands in /root/w/out.
set -uo pipefail
W=/root/w/rec
# shellcheck source=benchmarks/gpu/canary_recovery_common.sh
. /root/repo/benchmarks/gpu/canary_recovery_common.sh
ARGS="trainer.save_freq=10"
STOP_STEP="${STOP_STEP:-14}"

{ record_env
  git -C /root/repo log -1 --format=%H 2>/dev/null || true
} > "$O/env.txt" 2>&1

attempt() {  # N: start the user's command in a session of its own (no job control here: setsid execs, so make's
  # pid is its session and process group id); sets pid
  setsid make reproduce RECIPE="$RECIPE" PROFILE="$PROFILE" ARGS="$ARGS" > "$O/attempt-$1.log" 2>&1 < /dev/null &
  pid=$!
  sleep 1
  ps -o pid,pgid,sid,args -p "$pid" >> "$O/timeline.txt" 2>&1
}
after_stop() {  # what a stop left behind, 15 s later
  sleep 15
  { echo "== after attempt $1: tracker $(tracker)"
    nvidia-smi --query-gpu=memory.used --format=csv,noheader
    echo "processes left (ray, vllm, verl, rlrecipes):"
    pgrep -af 'raylet|gcs_server|vllm|VLLM|main_ppo|stopguard|rlrecipes|ray::'
    find "$CK" -maxdepth 3 -printf '%y %s %p\n' 2>&1 | sort -k3 | head -60
    python3 -m json.tool "$LG/reproduce.json" 2>&1
  } >> "$O/after-stops.txt" 2>&1
}

stamp "attempt 1: make reproduce; SIGTERM to the reproduce process at step $STOP_STEP"
if [ -n "${ATTACH:-}" ]; then pid=$(pgrep -xf "make reproduce RECIPE=$RECIPE PROFILE=$PROFILE ARGS=$ARGS" | head -1)
else attempt 1; fi
while kill -0 "$pid" 2>/dev/null && [ "$(last_step)" -lt "$STOP_STEP" ]; do sleep 1; done
target=$(pgrep -f "rlrecipes reproduce $RECIPE" | head -1)
stamp "attempt 1: step $(last_step) logged, tracker $(tracker); SIGTERM to pid $target"
kill -TERM "$target"
while kill -0 "$pid" 2>/dev/null; do sleep 1; done; wait "$pid" 2>/dev/null; rc=$?
stamp "attempt 1: make exit $rc; $(grep -a '^\[reproduce\] train' "$O/attempt-1.log" | tail -1)"
after_stop 1

stamp "attempt 2: the same command; SIGKILL to its process group while a checkpoint above the tracker is written"
attempt 2
python3 - "$CK" "$pid" >> "$O/timeline.txt" 2>&1 <<'EOF'
import os, re, signal, sys, time
ck, pgid = sys.argv[1], int(sys.argv[2])
def tracker():
    try:
        return int(open(os.path.join(ck, "latest_checkpointed_iteration.txt")).read())
    except (OSError, ValueError):
        return -1
start = tracker()
while True:
    try:
        os.kill(pgid, 0)
    except ProcessLookupError:
        print("attempt 2 ended before a save"); break
    steps = [int(m.group(1)) for n in (os.listdir(ck) if os.path.isdir(ck) else [])
             if (m := re.fullmatch(r"global_step_(\d+)", n))]
    above = [s for s in steps if s > max(start, tracker())]
    if above:
        os.killpg(pgid, signal.SIGKILL)
        d = os.path.join(ck, f"global_step_{max(above)}")
        files = sorted(os.path.relpath(os.path.join(b, f), d) for b, _, fs in os.walk(d) for f in fs)
        print(f"SIGKILL to process group {pgid}: global_step_{max(above)} being written ({len(files)} files so far:"
              f" {files[:12]}), tracker {tracker()}")
        break
    time.sleep(0.02)
EOF
wait "$pid"; rc=$?
stamp "attempt 2: make exit $rc; tracker $(tracker)"
after_stop 2

stamp "attempt 3: the same command, to the verdict"
attempt 3
wait "$pid"; rc=$?
stamp "attempt 3: make exit $rc; $(grep -a 'expected result' "$O/attempt-3.log" | tail -1)"
nvidia-smi --query-gpu=memory.used --format=csv,noheader >> "$O/after-stops.txt" 2>&1
stamp "all done"
tar -czf "$O/recovery-run.tgz" -C "$W" --exclude='*.safetensors' --exclude='*.pt' --exclude='*.parquet' \
  --exclude='*.bin' --exclude='data' --exclude='models' logs reports ckpt 2>/dev/null
touch "$O/DONE"

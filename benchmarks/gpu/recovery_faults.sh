#!/usr/bin/env bash
# GPU: the learning canary through two more faults, each followed by the user's own command again
# (docs/bench/gpu-reliability.md). `make reproduce RECIPE=canary-grpo-lora PROFILE=any-1gpu-hopper
# ARGS=trainer.save_freq=5`, inside the image's environment (RLRECIPES_IN_IMAGE=1), from an empty directory, with the
# watchdog beside it as compose runs it (its status is the stop guard's RLRECIPES_STALL_STATUS):
#
#   1  the vLLM server killed during a weight sync: SIGKILL to vLLM's engine process (VLLM::EngineCore, the one
#      that holds the weights) the moment the tracker says 5. verl 0.9.1 saves, then syncs the weights into vLLM
#      (timing_s/save_checkpoint before timing_s/update_weights), so the kill lands in the sync.
#   2  the checkpoint volume filled during a save: the checkpoints live on a volume of their own (a 256 MiB tmpfs;
#      the root disk where mounting is refused), filled but for FREE_LEFT_MIB once step 9 is logged, so the save of
#      step 10 runs out of space. The filler then goes (what a user does), and the same command again.
#   3  the same command, to the verdict (with the eval summary kept).
#
# A fault that leaves the command hanging is stopped with SIGTERM after HANG_S and recorded as a hang.
# Written before the watchdog's dead-engine rule (rlrecipes/watchdog/progress.py): with it, attempt 1's command
# relaunches itself after the kill (exit 75, a resume with its own start-up) and runs on, which `finish` would
# take for a hang; rework that flow before the next full run (docs/bench/gpu-reliability.md).
# Run detached after the bundle is installed (benchmarks/gpu/bundle_install_and_start.sh with
# JOB=benchmarks/gpu/recovery_faults.sh); follow with benchmarks/gpu/job_follow.sh. Everything lands in /root/w/out.
set -uo pipefail
W=/root/w/faults
# shellcheck source=benchmarks/gpu/canary_recovery_common.sh
. /root/repo/benchmarks/gpu/canary_recovery_common.sh
mkdir -p "$CKPT_DIR"
# KILL_AT: the tracker step whose weight sync the kill lands in (a checkpoint every SAVE_FREQ steps); STOP_AFTER=1
# ends after the first fault (a sitting too short for all three attempts).
SAVE_FREQ="${SAVE_FREQ:-5}" KILL_AT="${KILL_AT:-5}" STOP_AFTER="${STOP_AFTER:-3}"
ARGS="trainer.save_freq=$SAVE_FREQ"
HANG_S="${HANG_S:-150}" FREE_LEFT_MIB="${FREE_LEFT_MIB:-8}"

if mount -t tmpfs -o size=256m tmpfs "$CKPT_DIR" 2>>"$O/timeline.txt"; then VOLUME="a 256 MiB tmpfs of its own"
else VOLUME="the root disk (mounting refused)"; fi
{ record_env
  echo "checkpoint volume: $VOLUME"; df -B1M "$CKPT_DIR"
} > "$O/env.txt" 2>&1
stamp "checkpoint volume: $VOLUME"

# The sidecar as compose.yaml runs it (keep-last 2, --progress on the logs), with a 5 s interval and a 60 s grace
# so its passes show within minutes; a 1 MiB floor instead of the image's 20G (the volume is 256 MiB).
export RLRECIPES_STALL_STATUS="$CKPT_DIR/.watchdog/status.json" STALL_RESTARTS=3
mkdir -p "$LOG_DIR"
setsid rlrecipes watchdog --root "$CKPT_DIR" --keep-last 2 --interval 5 --grace 60 --min-free 1M \
  --progress "$LOG_DIR" > "$O/watchdog.log" 2>&1 < /dev/null &
WATCHDOG=$!

attempt() {  # N: the user's command in a session of its own; sets pid
  setsid make reproduce RECIPE="$RECIPE" PROFILE="$PROFILE" ARGS="$ARGS" > "$O/attempt-$1.log" 2>&1 < /dev/null &
  pid=$!
}
finish() {  # N: wait for the attempt; a hang gets the clean stop (SIGTERM, as docker stop) after HANG_S
  local waited=0
  while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt "$HANG_S" ]; do sleep 1; waited=$((waited + 1)); done
  if kill -0 "$pid" 2>/dev/null; then
    stamp "attempt $1: still running ${HANG_S}s after the fault (step $(last_step)): a hang; SIGTERM to reproduce"
    pkill -TERM -f "rlrecipes reproduce $RECIPE"
    waited=0; while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt 90 ]; do sleep 1; waited=$((waited + 1)); done
    kill -0 "$pid" 2>/dev/null && { stamp "attempt $1: SIGKILL to its process group"; kill -KILL -- "-$pid"; }
  fi
  wait "$pid"; rc=$?
  stamp "attempt $1: make exit $rc; $(grep -a '^\[rlrecipes\]\|^\[reproduce\] train' "$O/attempt-$1.log" | tail -2 | tr '\n' ' ')"
}
after() {  # N: what the fault left behind, 15 s later
  sleep 15
  { echo "== after attempt $1: tracker $(tracker)"
    nvidia-smi --query-gpu=memory.used --format=csv,noheader
    echo "processes left (ray, vllm, verl, rlrecipes but the watchdog):"
    pgrep -af 'raylet|gcs_server|vllm|VLLM|main_ppo|stopguard|rlrecipes|ray::' | grep -v 'rlrecipes watchdog'
    df -B1K "$CKPT_DIR"
    find "$CK" -printf '%y %s %p\n' 2>&1 | sort -k3 | head -60
    python3 -m json.tool "$LG/reproduce.json" 2>&1
    python3 - "$CKPT_DIR/.watchdog/status.json" <<'EOF'
import json, sys, time
s = json.load(open(sys.argv[1]))
print("watchdog status:", round(time.time() - s["time"]), "s old, healthy", s["healthy"], "free",
      s["budget"]["fs_free_bytes"], [(f["code"], f["message"][:160]) for f in s["findings"]],
      [(e["name"], e["resume_step"], [(x["step"], x["state"]) for x in e["steps"]]) for e in s["experiments"]])
EOF
  } >> "$O/after.txt" 2>&1
}

stamp "attempt 1: make reproduce; SIGKILL to vLLM's engine process when the tracker says $KILL_AT (the weight sync)"
attempt 1
python3 - "$CK" "$pid" "$KILL_AT" >> "$O/timeline.txt" 2>&1 <<'EOF'
import os, signal, subprocess, sys, time
ck, pgid, kill_at = sys.argv[1], int(sys.argv[2]), sys.argv[3]
path = os.path.join(ck, "latest_checkpointed_iteration.txt")
while True:
    try:
        os.kill(pgid, 0)
    except ProcessLookupError:
        print(f"attempt 1 ended before the save of step {kill_at}"); break
    try:
        step = open(path).read().strip()
    except OSError:
        step = ""
    if step == kill_at:
        seen = time.time()
        pids = subprocess.run(["pgrep", "-f", "^VLLM::EngineCore"], capture_output=True, text=True).stdout.split()
        which = "VLLM::EngineCore"
        if not pids:
            pids = subprocess.run(["pgrep", "-f", "^ray::vLLMHttpServer"], capture_output=True, text=True).stdout.split()
            which = "ray::vLLMHttpServer"
        for p in pids:
            os.kill(int(p), signal.SIGKILL)
        print(f"tracker {kill_at} seen; SIGKILL to {which} {pids} {1000 * (time.time() - seen):.0f} ms later "
              f"(tracker written {1000 * (seen - os.stat(path).st_mtime):.0f} ms before it was seen)")
        print(subprocess.run(["ps", "-eo", "pid,ppid,etimes,args"], capture_output=True, text=True).stdout[-6000:])
        break
    time.sleep(0.005)
EOF
finish 1
after 1
if [ "$STOP_AFTER" -le 1 ]; then
  kill "$WATCHDOG" 2>/dev/null
  tar -czf "$O/faults-run.tgz" -C "$W" --exclude='*.safetensors' --exclude='*.pt' --exclude='*.parquet' \
    --exclude='*.bin' logs ckpt 2>/dev/null
  stamp "stopped after attempt 1 (STOP_AFTER=1)"; touch "$O/DONE"; exit 0
fi

stamp "attempt 2: the same command; the checkpoint volume filled but for ${FREE_LEFT_MIB} MiB once step 9 is logged"
attempt 2
while kill -0 "$pid" 2>/dev/null && [ "$(last_step)" -lt 9 ]; do sleep 0.2; done
free_k=$(df --output=avail -B1K "$CKPT_DIR" | tail -1)
fill_k=$(( free_k - FREE_LEFT_MIB * 1024 ))
if [ "$fill_k" -gt 0 ] && fallocate -l "${fill_k}K" "$CKPT_DIR/filler"; then
  stamp "attempt 2: step $(last_step) logged, tracker $(tracker); filled ${fill_k} KiB of ${free_k} KiB free: $(df --output=avail -B1K "$CKPT_DIR" | tail -1) KiB left"
else
  stamp "attempt 2: could not fill the volume (free ${free_k} KiB)"
fi
finish 2
after 2
stamp "attempt 2: the filler removed (what a user does once the volume is full)"
rm -f "$CKPT_DIR/filler"
sleep 6  # one watchdog pass with the space back
after 2b

stamp "attempt 3: the same command, to the verdict"
attempt 3
wait "$pid"; rc=$?
stamp "attempt 3: make exit $rc; $(grep -a 'expected result\|^outcome\|MET\|MISSED' "$O/attempt-3.log" | tail -3 | tr '\n' ' ')"
after 3
kill "$WATCHDOG" 2>/dev/null
stamp "all done"
tar -czf "$O/faults-run.tgz" -C "$W" --exclude='*.safetensors' --exclude='*.pt' --exclude='*.parquet' \
  --exclude='*.bin' --exclude='data' --exclude='models/canary-qwen2' --exclude='filler' \
  logs reports ckpt "models/$RECIPE-merged/eval" 2>/dev/null
touch "$O/DONE"

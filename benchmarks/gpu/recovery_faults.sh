#!/usr/bin/env bash
# GPU: the learning canary through two faults, each followed by the user's own command, to its verdict
# (docs/bench/gpu-reliability.md). `make reproduce RECIPE=canary-grpo-lora PROFILE=any-1gpu-hopper
# ARGS=trainer.save_freq=5`, inside the image's environment (RLRECIPES_IN_IMAGE=1), from an empty directory, with
# the watchdog beside it as compose runs it (its status is the stop guard's RLRECIPES_STALL_STATUS), driven by
# benchmarks/gpu/fault_driver.py:
#
#   1  the vLLM server killed during a weight sync: SIGKILL to vLLM's engine process (VLLM::EngineCore, the one
#      that holds the weights) the moment the tracker says KILL_AT. Expected: the command relaunches itself
#      (the dead engine is a stall at once: exit 75, a resume from checkpoint KILL_AT).
#   2  the checkpoint volume filled during a save: the checkpoints live on a volume of their own (a 256 MiB tmpfs;
#      the root disk where mounting is refused), filled but for FREE_LEFT_MIB once a launch after the kill has
#      logged step FILL_AT, so the next save runs out of space. The filler goes once that command has ended (what
#      a user does), and the same command again, to the verdict (with the eval summary kept).
#
# KILL_AT=0 skips the kill (the fill then comes in the first launch); FILL_AT=1000000 skips the fill. SEED=N runs
# `make reproduce ... SEED=N`: the canary's assets from seed N, the run in seed-N/ folders (a seed run of its own).
# SAVE_FREQ=1 KILL_AT=1 STOP_AFTER=1 was the first sitting's reduced form (the kill and the stop only); STOP_AFTER
# is gone: the driver runs the same command until it reaches the verdict (at most MAX_ATTEMPTS times).
# Run detached after the bundle is installed (benchmarks/gpu/bundle_install_and_start.sh with
# JOB=benchmarks/gpu/recovery_faults.sh); follow with benchmarks/gpu/job_follow.sh. Everything lands in /root/w/out.
set -uo pipefail
W=/root/w/faults
# shellcheck source=benchmarks/gpu/canary_recovery_common.sh
. /root/repo/benchmarks/gpu/canary_recovery_common.sh
mkdir -p "$CKPT_DIR"
# KILL_AT: the tracker step whose weight sync the kill lands in (a checkpoint every SAVE_FREQ steps); FILL_AT: the
# step, logged by a launch after the kill, after which the volume is filled (before the save of the next SAVE_FREQ).
# SAVE_FREQ= (empty): the recipe's own save_freq, i.e. the user's command with no ARGS at all.
SAVE_FREQ="${SAVE_FREQ-5}" KILL_AT="${KILL_AT:-5}" FILL_AT="${FILL_AT:-7}" MAX_ATTEMPTS="${MAX_ATTEMPTS:-3}"
ARGS="${SAVE_FREQ:+trainer.save_freq=$SAVE_FREQ}"
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

stamp "the same command until its verdict; faults: vLLM engine killed at tracker $KILL_AT, volume full at $FILL_AT"
python3 /root/repo/benchmarks/gpu/fault_driver.py --ck "$CK" --logs "$LG" --out "$O" --t0 "$T0" \
  --kill-at "$KILL_AT" --fill-at "$FILL_AT" --free-left-mib "$FREE_LEFT_MIB" --hang-s "$HANG_S" \
  --max-attempts "$MAX_ATTEMPTS" \
  -- make reproduce RECIPE="$RECIPE" PROFILE="$PROFILE" SEED="$SEED" ARGS="$ARGS" >> "$O/job-driver.log" 2>&1
stamp "driver exit $?"
kill "$WATCHDOG" 2>/dev/null
cp "$CKPT_DIR/.watchdog/status.json" "$O/watchdog-status.json" 2>/dev/null
tar -czf "$O/faults-run.tgz" -C "$W" --exclude='*.safetensors' --exclude='*.pt' --exclude='*.parquet' \
  --exclude='*.bin' --exclude='data' --exclude='models/canary-qwen2' --exclude='filler' \
  logs reports ckpt "models/$SEEDED$RECIPE-merged/eval" 2>/dev/null
stamp "all done"
touch "$O/DONE"

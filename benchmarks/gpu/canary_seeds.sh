#!/usr/bin/env bash
# GPU: the canaries on seeds of their own, for contracts whose bounds come from several seeds (docs/expect.md,
# "Seeds"). For each RECIPE:SEED in RUNS, the command a user runs:
#
#   make reproduce RECIPE=<recipe> PROFILE=any-1gpu-hopper SEED=<seed>
#
# inside the image's environment, from an empty directory: assets built from that seed, the run in seed-N/
# folders of its own. At most PARALLEL of them share the GPU (each vLLM engine takes the profile's
# gpu_memory_utilization, 0.4), and one starts only once the one before it has its rollout engine up (verl's
# "checkpoint engine manager initialized"): vLLM sizes its KV cache from what the whole GPU has free while it
# profiles, and canaries started side by side failed there (benchmarks/gpu/canary_hopper_stack.sh). RUNS default:
# "canary-grpo-lora:1 canary-grpo-lora:2 canary-ppo:1 canary-ppo:2". Each run's verdict, logs, report and eval
# summary are packed into /root/w/out/seeds-<recipe>-<seed>.tgz as it ends, so a cut-short sitting keeps what
# finished. Every seed's assets are built first, side by side, with the command and into the folders of a run's
# assets stage (which then finds them up to date); a seed the builder refuses (a held-out start outside the band)
# has its runs skipped, and the log says so. A run an earlier sitting's host was shut down under goes on from its last
# checkpoint where that sitting's relay was carried into RELAY (default /root/relay; benchmarks/gpu/relay.sh): its
# checkpoint and logs are unpacked before the assets, and kept only if the assets rebuilt from the seed are the
# same bytes. Run detached after the bundle is installed (benchmarks/gpu/bundle_install_and_start.sh with
# JOB=benchmarks/gpu/canary_seeds.sh); follow with benchmarks/gpu/job_follow.sh.
set -uo pipefail
W=/root/w/seeds
# shellcheck source=benchmarks/gpu/canary_recovery_common.sh
. /root/repo/benchmarks/gpu/canary_recovery_common.sh
read -ra runs <<< "${RUNS:-canary-grpo-lora:1 canary-grpo-lora:2 canary-ppo:1 canary-ppo:2}"
PARALLEL="${PARALLEL:-2}" UP_WAIT_S="${UP_WAIT_S:-900}"

# shellcheck source=benchmarks/gpu/seed_logs.sh
. /root/repo/benchmarks/gpu/seed_logs.sh
pack() {  # $1 recipe, $2 seed: what the run left, no weights or data
  tar -czf "$O/seeds-$1-$2.tgz" -C "$W" --exclude='*.safetensors' --exclude='*.pt' --exclude='*.parquet' \
    --exclude='*.bin' "logs/seed-$2/$1" "reports/seed-$2/$1" "models/seed-$2/$1-merged/eval" \
    "models/seed-$2/canary-qwen2/canary-manifest.json" 2>/dev/null
}

# Every seed's assets first, side by side with the environment's record (each a 3.9M-parameter SFT and greedy
# checks): the same command as a run's assets stage, into the same folders, so that stage finds them up to date; and a
# seed whose held-out start falls outside the band is known before a run's place on the GPU is spent on it.
declare -A refused=()
RELAY="${RELAY:-/root/relay}"
relayed=()
if [ -d "$RELAY" ]; then
  mapfile -t relayed < <(bash /root/repo/benchmarks/gpu/relay.sh unpack "$RELAY" 2> "$O/relay-unpack.txt")
  while read -r line; do stamp "$line"; done < "$O/relay-unpack.txt"
fi
[ "${#relayed[@]}" -eq 0 ] || stamp "relayed from an earlier sitting: ${relayed[*]}"
record_env > "$O/env.txt" 2>&1 &
for seed in $(printf '%s\n' "${runs[@]##*:}" | sort -un); do
  ( seed_assets "$seed" "$O"; echo $? > "$O/assets-seed-$seed.rc" ) &
done
wait
for f in "$O"/assets-seed-*.rc; do
  seed=${f##*assets-seed-}; seed=${seed%.rc}
  [ "$(cat "$f")" = 0 ] || refused[$seed]=1
done
for run in ${relayed[@]+"${relayed[@]}"}; do  # recipe:seed; its checkpoint kept only on the same assets
  [[ " ${runs[*]} " == *" $run "* ]] || { stamp "relay $run: not among RUNS, left as it is"; continue; }
  [ -n "${refused[${run##*:}]:-}" ] \
    || stamp "$(bash /root/repo/benchmarks/gpu/relay.sh check "${run##*:}" "${run%%:*}")"
done

names=()
for run in "${runs[@]}"; do
  recipe=${run%%:*} seed=${run##*:}
  [ -z "${refused[$seed]:-}" ] || { stamp "$recipe seed $seed: skipped (its assets were refused)"; continue; }
  while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL" ]; do sleep 5; done
  stamp "$recipe seed $seed: make reproduce RECIPE=$recipe PROFILE=$PROFILE SEED=$seed"
  started="$O/started-$recipe-$seed"; touch "$started"
  ( make reproduce RECIPE="$recipe" PROFILE="$PROFILE" SEED="$seed" > "$O/$recipe-$seed.log" 2>&1 < /dev/null
    code=$?
    # a failure that comes from sharing the host, not from the run: the same command again, as a user would,
    # goes on from the stage that failed (once)
    if [ "$code" -ne 0 ] && why=$(shared_host_failure "$LOG_DIR/seed-$seed/$recipe" "$started"); then
      stamp "$recipe seed $seed: $why: the same command again"
      make reproduce RECIPE="$recipe" PROFILE="$PROFILE" SEED="$seed" >> "$O/$recipe-$seed.log" 2>&1 < /dev/null
      code=$?
    fi
    pack "$recipe" "$seed"
    # the verdict (a seed the builder refuses never gets here: its runs are skipped above)
    stamp "$recipe seed $seed: exit $code; $(grep -aE 'expected result' "$O/$recipe-$seed.log" \
      | tail -1 | cut -c1-400)" ) &
  pid=$!  # now: a process substitution (rollout_up's) sets $! too
  names+=("$recipe:$seed")
  # the next one starts once this one's rollout engine is up (or it ended, or UP_WAIT_S passed)
  waited=0
  until rollout_up "$LOG_DIR/seed-$seed/$recipe" "$started" || ! kill -0 "$pid" 2>/dev/null \
      || [ "$waited" -ge "$UP_WAIT_S" ]; do
    sleep 5; waited=$((waited + 5))
  done
  stamp "$recipe seed $seed: rollout engine up after ${waited}s (or the run ended); the next may start"
done
wait
stamp "all done: ${names[*]}"
touch "$O/DONE"

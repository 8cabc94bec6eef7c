#!/usr/bin/env bash
# GPU: the canaries on seeds of their own, for contracts whose bounds come from several seeds (docs/expect.md,
# "Seeds"). For each RECIPE:SEED in RUNS, the command a user runs:
#
#   make reproduce RECIPE=<recipe> PROFILE=any-1gpu-hopper SEED=<seed>
#
# inside the image's environment, from an empty directory: assets built from that seed, the run in seed-N/
# folders of its own. At most PARALLEL of them share the GPU, and one starts only once the one before it has its
# rollout engine up (verl's "checkpoint engine manager initialized"). Runs that share the GPU (PARALLEL > 1) give
# vLLM a fixed KV-cache share, KV_CACHE_BYTES (default 1 GiB; 0 leaves it as shipped), with vLLM's own
# kv_cache_memory_bytes through verl's engine_kwargs (the one override they add; it shows in the run's
# reproduce.json and in the config verl prints, not in the run directory, which holds the recipe's launch):
# as shipped, vLLM sizes its KV cache from what the whole GPU has free while it profiles, and a run beside it
# allocates or frees memory meanwhile with every wake-up and sleep -- canaries started side by side failed there
# (benchmarks/gpu/canary_hopper_stack.sh), and so did PPO seed 0 started after seed 2's engine was up
# (docs/bench/gpu-data/canary-seeds-ppo-hopper-h100-2). The canary's model needs about 64 MiB of KV cache for a
# step's 256 sequences of 128 tokens (2 KiB a token: 4 layers x 2 KV heads x 64 x 2 x bf16). RUNS default:
# "canary-grpo-lora:1 canary-grpo-lora:2 canary-ppo:1 canary-ppo:2". Each run's verdict, logs, report and eval
# summary are packed into /root/w/out/seeds-<recipe>-<seed>.tgz as it ends, so a cut-short sitting keeps what
# finished. Every seed's assets are built first, side by side, with the command and into the folders of a run's
# assets stage (which then finds them up to date); a seed the builder refuses (a held-out start outside the band)
# has its runs skipped, and the log says so. A run an earlier sitting's host was shut down under goes on from its last
# checkpoint where that sitting's relay was carried into RELAY (default /root/relay; benchmarks/gpu/relay.sh): its
# checkpoint and logs are unpacked before the assets, and kept only if the assets rebuilt from the seed are the
# same bytes. Run detached after the bundle is installed (benchmarks/gpu/bundle_install_and_start.sh with
# JOB=benchmarks/gpu/canary_seeds.sh); follow with benchmarks/gpu/job_follow.sh.
#
# A negative control is RECIPE:SEED:CONTROL: the same command on that seed's assets (a copy: the merge writes beside
# them), in folders of its own under control-CONTROL/, with one thing broken, to show the contract misses a run
# that cannot learn (docs/expect.md, "Bounds from seeds"); packed as out/seeds-RECIPE-SEED-CONTROL.tgz:
#   frozen-actor  the actor's learning rate 0 (actor_rollout_ref.actor.optim.lr=0): rollout, critic, validation and
#                 every check run as shipped while the policy never changes -- a control for accuracy and reward
#   shuffled      the reward that ignores the answer (rlrecipes/smoke/shuffled_reward.py, through REWARD_FN): a
#                 control for the reward trend only (verl validates with the same reward)
# CONTROL_STEPS (default 40) cuts a control short: a frozen policy reads the same at step 40 as at step 100.
# A run whose start failed for a reason another run caused goes again with the same command (once); where the host
# had no free port or vLLM's memory profiling was upset, only once the runs beside it have ended (RETRY_WAIT_S,
# default 1200, at most): their ports and their sleeping and waking engines stay while they step. PORT_RANGE
# ("LOW HIGH") sets the host's ephemeral port range before anything starts (docs/bench/cpu-data/tq-time-wait.txt:
# a canary's TransferQueue calls hold about 2,000 ports in TIME_WAIT a step), TW_REUSE its net.ipv4.tcp_tw_reuse.
set -uo pipefail
HOST_ROOT="${HOST_ROOT:-/root}"; W="$HOST_ROOT/w/seeds"
# shellcheck source=benchmarks/gpu/canary_recovery_common.sh
. "$HOST_ROOT/repo/benchmarks/gpu/canary_recovery_common.sh"
read -ra runs <<< "${RUNS:-canary-grpo-lora:1 canary-grpo-lora:2 canary-ppo:1 canary-ppo:2}"
PARALLEL="${PARALLEL:-2}" UP_WAIT_S="${UP_WAIT_S:-900}" RETRY_WAIT_S="${RETRY_WAIT_S:-1200}"
KV_CACHE_BYTES="${KV_CACHE_BYTES:-1073741824}"
if [[ ! $KV_CACHE_BYTES =~ ^[0-9]+$ ]]; then  # vLLM would refuse it only once every run has started
  stamp "KV_CACHE_BYTES: '$KV_CACHE_BYTES' is not a number of bytes (0: as shipped)"; touch "$O/DONE"; exit 2
fi
shared=()  # what every run adds when runs share the GPU
if [ "$PARALLEL" -gt 1 ] && [ "$KV_CACHE_BYTES" != 0 ]; then
  shared=("+actor_rollout_ref.rollout.engine_kwargs.vllm.kv_cache_memory_bytes=$KV_CACHE_BYTES")
fi

# shellcheck source=benchmarks/gpu/seed_logs.sh
. "$HOST_ROOT/repo/benchmarks/gpu/seed_logs.sh"
seeds=() parsed=()
for run in "${runs[@]}"; do  # every entry well formed, every control a known way to break the run, or nothing runs
  if ! parts=$(run_parts "$run"); then
    stamp "RUNS: '$run' is not RECIPE:SEED or RECIPE:SEED:CONTROL"; touch "$O/DONE"; exit 2
  fi
  read -r _ seed control <<< "$parts"
  if [ "$control" != - ] && ! control_env "$control" > /dev/null; then
    stamp "RUNS: '$run' names no known control (frozen-actor, shuffled)"; touch "$O/DONE"; exit 2
  fi
  seeds+=("$seed") parsed+=("$parts")
done
pack() {  # $1 recipe, $2 seed, $3 its folders under W ("" for a seed run), $4 the tarball's name: what the run
  # left, no weights or data
  tar -czf "$O/$4.tgz" -C "$W/$3" --exclude='*.safetensors' --exclude='*.pt' --exclude='*.parquet' \
    --exclude='*.bin' "logs/seed-$2/$1" "reports/seed-$2/$1" "models/seed-$2/$1-merged/eval" \
    "models/seed-$2/canary-qwen2/canary-manifest.json" 2>/dev/null
}
others_running() {  # $1: a run's name; true while another run of this job has started and not ended
  local f
  for f in "$O"/started-*; do
    [ "$f" = "$O/started-$1" ] || [ -e "$O/ended-${f##*/started-}" ] || return 0
  done
  return 1
}

# Every seed's assets first, side by side with the environment's record (each a 3.9M-parameter SFT and greedy
# checks): the same command as a run's assets stage, into the same folders, so that stage finds them up to date; and a
# seed whose held-out start falls outside the band is known before a run's place on the GPU is spent on it.
declare -A refused=()
RELAY="${RELAY:-$HOST_ROOT/relay}"
relayed=()
if [ -d "$RELAY" ]; then
  mapfile -t relayed < <(SEEDS_DIR="$W" OUT_DIR="$O" bash "$HOST_ROOT/repo/benchmarks/gpu/relay.sh" unpack "$RELAY" \
    2> "$O/relay-unpack.txt")
  while read -r line; do stamp "$line"; done < "$O/relay-unpack.txt"
fi
[ "${#relayed[@]}" -eq 0 ] || stamp "relayed from an earlier sitting: ${relayed[*]}"
record_env > "$O/env.txt" 2>&1 &
# the host's TCP sockets every 30 s (a bind to port 0 was refused beside another run: seed_logs.sh), with the
# ephemeral range they come from; out of the job table, so that neither the PARALLEL count nor the last wait sees it
# PORT_RANGE ("LOW HIGH") widens the host's range first (a namespaced sysctl: what compose.yaml's sysctls set)
if [ -n "${PORT_RANGE:-}" ]; then
  if echo "$PORT_RANGE" > /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null; then
    stamp "ephemeral port range set to $PORT_RANGE"
  else
    stamp "ephemeral port range: could not set '$PORT_RANGE'; left as it was"
  fi
fi
# TW_REUSE sets net.ipv4.tcp_tw_reuse the same way (compose.yaml sets 1: TransferQueue's connections take back their
# own TIME_WAIT ports and leave the half of the range that bind() to port 0 uses; docs/bench/cpu-data/ports-tw-reuse.txt)
if [ -n "${TW_REUSE:-}" ]; then
  if echo "$TW_REUSE" > /proc/sys/net/ipv4/tcp_tw_reuse 2>/dev/null; then
    stamp "tcp_tw_reuse set to $TW_REUSE"
  else
    stamp "tcp_tw_reuse: could not set '$TW_REUSE'; left as it was"
  fi
fi
echo "ephemeral ports: $(tr -s '\t ' - < /proc/sys/net/ipv4/ip_local_port_range)" > "$O/sockstat.txt"
echo "tcp_tw_reuse: $(cat /proc/sys/net/ipv4/tcp_tw_reuse 2>/dev/null || echo unread)" >> "$O/sockstat.txt"
# and how many distinct local ports those in TIME_WAIT (state 06) hold: a bind to port 0 fails once they cover the range;
# beside it the GPU's memory in use, every process's together (gpu-memory.txt): each vLLM engine's start asks
# gpu_memory_utilization of the GPU free, KV-cache share or not (vLLM 0.24's request_memory), so what the runs
# already started hold is what bounds how many can share the GPU
echo "memory.used, memory.total [MiB]" > "$O/gpu-memory.txt"
( while [ ! -f "$O/DONE" ]; do
    t="[$(( $(date +%s) - T0 ))s]"
    echo "$t $(grep -h '^TCP:' /proc/net/sockstat /proc/net/sockstat6 | tr '\n' ' ')" \
      "tw-ports $(awk '$4 == "06" { split($2, a, ":"); print a[2] }' /proc/net/tcp /proc/net/tcp6 | sort -u | wc -l)" \
      >> "$O/sockstat.txt"
    echo "$t $(nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader,nounits 2>&1 | head -1)" \
      >> "$O/gpu-memory.txt"
    sleep 30
  done ) > /dev/null 2>&1 &
disown
for seed in $(printf '%s\n' "${seeds[@]}" | sort -un); do
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
    || stamp "$(SEEDS_DIR="$W" OUT_DIR="$O" bash "$HOST_ROOT/repo/benchmarks/gpu/relay.sh" check "${run##*:}" \
      "${run%%:*}")"
done

names=()
for parts in "${parsed[@]}"; do
  read -r recipe seed control <<< "$parts"; [ "$control" = - ] && control=
  name="$recipe-$seed${control:+-$control}" what="$recipe seed $seed${control:+ (control: $control)}"
  [ -z "${refused[$seed]:-}" ] || { stamp "$what: skipped (its assets were refused)"; continue; }
  while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL" ]; do sleep 5; done
  # a control's folders: its own, with a copy of the seed's assets (the merge writes beside them); its breakage
  base="" env=() args=()
  if [ -n "$control" ]; then
    base="control-$control"; mkdir -p "$W/$base/models"
    cp -a "$MODELS_DIR/seed-$seed" "$W/$base/models/"
    env=(MODELS_DIR="$W/$base/models" CKPT_DIR="$W/$base/ckpt" LOG_DIR="$W/$base/logs"
         REPORTS_DIR="$W/$base/reports" CACHE_DIR="$W/$base/cache")
    { read -ra broken; read -ra args; } < <(control_env "$control")
    env+=(${broken[@]+"${broken[@]}"})
  fi
  args=(${shared[@]+"${shared[@]}"} ${args[@]+"${args[@]}"})
  logs="$W/${base:+$base/}logs/seed-$seed/$recipe"
  stamp "$what: make reproduce RECIPE=$recipe PROFILE=$PROFILE SEED=$seed${args[*]+ ARGS=\"${args[*]}\"}${env[*]+ (${env[*]})}"
  started="$O/started-$name"; touch "$started"
  ( [ "${#env[@]}" -eq 0 ] || export "${env[@]}"
    reproduce() { make reproduce RECIPE="$recipe" PROFILE="$PROFILE" SEED="$seed" ARGS="${args[*]-}" < /dev/null; }
    reproduce > "$O/$name.log" 2>&1
    code=$?
    # a failure that comes from sharing the host, not from the run: the same command again, as a user would,
    # goes on from the stage that failed (once)
    cause=1
    [ "$code" -eq 0 ] || { why=$(shared_host_failure "$logs" "$started"); cause=$?; }
    if [ "$cause" -ne 1 ]; then
      # a host short of ports stays short while the runs beside it step (a closed connection keeps its port in
      # TIME_WAIT for about a minute), and their engines sleep and wake with every step (shared_host_failure's 2):
      # the same command again once they have ended (RETRY_WAIT_S at most)
      if [ "$cause" -eq 2 ]; then
        waited=0
        while others_running "$name" && [ "$waited" -lt "$RETRY_WAIT_S" ]; do sleep 5; waited=$((waited + 5)); done
        why="$why; the runs beside it ended ${waited}s later"
      fi
      stamp "$what: $why: the same command again"
      reproduce >> "$O/$name.log" 2>&1
      code=$?
    fi
    pack "$recipe" "$seed" "$base" "seeds-$name"
    # the verdict (a seed the builder refuses never gets here: its runs are skipped above)
    stamp "$what: exit $code; $(grep -aE 'expected result' "$O/$name.log" | tail -1 | cut -c1-400)"
    touch "$O/ended-$name" ) &
  pid=$!  # now: a process substitution (rollout_up's) sets $! too
  names+=("$recipe:$seed${control:+:$control}")
  # the next one starts once this one's rollout engine is up (or it ended, or UP_WAIT_S passed)
  waited=0
  until rollout_up "$logs" "$started" || ! kill -0 "$pid" 2>/dev/null \
      || [ "$waited" -ge "$UP_WAIT_S" ]; do
    sleep 5; waited=$((waited + 5))
  done
  stamp "$what: rollout engine up after ${waited}s (or the run ended); the next may start"
done
wait
stamp "all done: ${names[*]}"
touch "$O/DONE"

#!/usr/bin/env bash
# What benchmarks/gpu/canary_seeds.sh reads (sourced; no side effects, so that tests/repo/test_gpu_seed_logs.py
# calls the same functions): a RUNS entry's parts, what a negative control changes, and what a seed run's console
# logs say -- whether its rollout engine is up, and whether it failed for a reason another run on the same host
# caused, which the same command again gets past.
run_parts() {  # $1: a RUNS entry, RECIPE:SEED or RECIPE:SEED:CONTROL; prints "RECIPE SEED CONTROL" (CONTROL "-"
  # for a seed run), or returns 1 for anything else
  local recipe=${1%%:*} rest=${1#*:} seed control
  [[ $1 == *:* ]] || return 1
  seed=${rest%%:*} control=${rest#*:}
  [ "$control" = "$rest" ] && control=-
  [[ $recipe =~ ^[a-z0-9.-]+$ && $seed =~ ^[0-9]+$ && $control =~ ^[a-z0-9-]+$ ]] || return 1
  echo "$recipe $seed $control"
}
control_env() {  # $1: a control's name; prints the environment it sets (line 1) and the Hydra overrides it adds
  # (line 2), or returns 1 for a name it does not know. CONTROL_STEPS (default 40) cuts a control short.
  case $1 in
    frozen-actor)  # the policy never changes: rollout, critic, validation and every check as shipped
      echo; echo "actor_rollout_ref.actor.optim.lr=0 trainer.total_training_steps=${CONTROL_STEPS:-40}" ;;
    shuffled)  # the reward that ignores the answer (verl validates with it too: a control for the reward only)
      echo "REWARD_FN=${HOST_ROOT:-/root}/repo/rlrecipes/smoke/shuffled_reward.py"
      echo "trainer.total_training_steps=${CONTROL_STEPS:-40}" ;;
    *) return 1 ;;
  esac
}
logged_since() {  # $1: the run's log folder, $2: a file touched as the run started, $3: a text; 0 once a console
  # log written since then has it, word for word (a relayed run's folder holds the earlier sitting's logs too,
  # which had it)
  local log
  while read -r log; do grep -aqsF "$3" "$log" && return 0; done \
    < <(find "$1" -maxdepth 1 -name 'console-*.log' -newer "$2" 2>/dev/null)
  return 1
}
rollout_up() { logged_since "$1" "$2" "checkpoint engine manager initialized"; }
shared_host_failure() {  # $1: the run's log folder, $2: its start marker; prints why and returns 0 for a failure
  # another run on the host caused at one moment (the same command again can go at once), 2 for one that lasts
  # while the runs beside it step (again only once they have ended), 1 for any other. The causes:
  # - vLLM's memory profiling counts what another run allocates meanwhile (its wake-up) as its own, and refuses to
  #   go on when another run frees memory meanwhile (its engine going to sleep after a rollout: vllm/v1/worker/
  #   gpu_worker.py, determine_available_memory, vLLM 0.24; PPO seed 0 beside seed 2 on an H100 host);
  # - verl's worker group picks its torch.distributed port by binding port 0 and closing the socket
  #   (Worker._get_free_port, verl 0.9.1), and the trainer binds it later: another run's process can take that
  #   port in between (seen on an H100 host: docs/bench/gpu-canary.md, "Bounds from seeds"; users report the same
  #   error from verl's workers in verl-project/verl#3147 and #5889, and the same race in vLLM's engines in #6677);
  # - a bind to port 0 refused (`[Errno 98] Address already in use`: TransferQueue's controller asking the kernel for
  #   any free port, transfer_queue/utils/zmq_utils.py get_free_port, beside a PPO run on an H100 host): the kernel
  #   refuses that only when it finds no free port in its ephemeral range, so the host was short of ports while
  #   the other run stepped (docs/bench/gpu-canary.md, "The PPO canary's seed 1"; the port count is in
  #   /proc/net/sockstat, which canary_seeds.sh now samples).
  if logged_since "$1" "$2" "No available memory for the cache blocks"; then
    echo "vLLM found no KV-cache memory while another run allocated"
  elif logged_since "$1" "$2" "Error in memory profiling"; then  # their engines sleep and wake with every step
    echo "vLLM's memory profiling saw another run free GPU memory (its engine going to sleep)"; return 2
  elif logged_since "$1" "$2" "EADDRINUSE"; then
    echo "the trainer's torch.distributed port was taken before it could bind it (EADDRINUSE)"
  elif logged_since "$1" "$2" "[Errno 98] Address already in use"; then  # their ports stay in TIME_WAIT a minute
    echo "the kernel had no free port to give (a bind to port 0 refused: [Errno 98] Address already in use)"
    return 2
  else
    return 1
  fi
}

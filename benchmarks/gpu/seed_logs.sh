#!/usr/bin/env bash
# What a seed run's console logs say, for benchmarks/gpu/canary_seeds.sh (sourced; no side effects, so that
# tests/repo/test_gpu_seed_logs.py reads the recorded logs with it): whether the run's rollout engine is up, and
# whether it failed for a reason another run on the same host caused, which the same command again gets past.
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
  # another run on the host caused:
  # - vLLM's memory profiling counts what another run allocates meanwhile (its wake-up) as its own;
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
  elif logged_since "$1" "$2" "EADDRINUSE"; then
    echo "the trainer's torch.distributed port was taken before it could bind it (EADDRINUSE)"
  elif logged_since "$1" "$2" "[Errno 98] Address already in use"; then
    echo "the kernel had no free port to give (a bind to port 0 refused: [Errno 98] Address already in use)"
  else
    return 1
  fi
}

#!/usr/bin/env bash
# GPU: the canary's start-up, lever by lever, on one host (issue 36; docs/bench/gpu-overhead.md). Each lever is
# `make train RECIPE=canary-grpo-lora PROFILE=any-1gpu-hopper` from step 0 (a checkpoint and log folder of its
# own), STEPS steps (default 5), no validation, no save -- long enough to pass "ready to fit" and time the steady
# steps after the first -- inside the image's environment, one after another, sharing one CACHE_DIR. `poll`, `uni`
# and `workers0` were measured in the third sitting and are on the Hopper profiles since (docs/bench/gpu-overhead.md,
# "The third lever sitting"): run now, each repeats what the profile sets, and "as shipped" includes all three.
# The levers (LEVERS's default, below, puts those not measured yet first, so that a sitting cut short keeps them):
#
#   shipped-cold   as shipped, the host's first launch (empty CACHE_DIR, cold page cache)
#   shipped-warm   as shipped again: what a host's second launch gains with verl's vLLM compile cache off
#   poll           verl's replay buffer polls TransferQueue every 0.1 s instead of 2 s (rlrecipes/verl/replay_poll.py,
#                  verl's own custom-sampler hook): a step lever -- every generation on record is a multiple of
#                  2 s plus a fraction -- against shipped-warm
#   awake          actor_rollout_ref.rollout.free_cache_engine=False: vLLM keeps its weights and KV cache between
#                  rollouts -- no sleep and wake, no KV-cache re-allocation each step (its 0.4 share stays allocated
#                  while the actor trains; the canary's training peak is ~2 GiB). A step lever, against shipped-warm
#   workers0       data.dataloader_num_workers=0: verl's data loaders read in the TaskRunner itself instead of 8
#                  worker processes each (verl's default): none forked from the TaskRunner at each epoch's
#                  first batch and at each validation (these launches run none), none left for Ray to SIGKILL
#                  when the run ends (the `DataLoader worker (pid ...) is killed by signal: Killed` traceback
#                  after the last step; tests/verl_layer/test_taskrunner_exit.py). A step lever, against
#                  shipped-warm; its console log shows whether the traceback is gone
#   uni            +actor_rollout_ref.rollout.engine_kwargs.vllm.distributed_executor_backend=uni: vLLM's model
#                  worker in its EngineCore process instead of a process of its own (verl passes "mp"; its
#                  engine_kwargs come after and win). At one GPU per engine nothing needs the extra process,
#                  and it is the one the console shows starting for 16 s (spawn, imports, NCCL) between the
#                  engine core's first line and the model load; vLLM's own default at world size 1. A start-up
#                  lever, against shipped-warm, whose generation time counts too (docs/bench/gpu-overhead.md)
#   eager          actor_rollout_ref.rollout.enforce_eager=True: no torch.compile, no CUDA graphs in vLLM (its
#                  start-up against its step time: generation without graphs)
#   lean           the CPU side's two levers (benchmarks/startup_cpu.sh, measured on a CPU host): one TransferQueue
#                  storage actor instead of verl's 8 and no Ray dashboard (against shipped-warm)
#   agents2        actor_rollout_ref.rollout.agent.num_workers=2: two agent-loop workers (Ray actors) instead of
#                  verl's 8 -- fewer processes to start, the 512 requests of a step through two; against shipped-warm
#   vllm-cache-1   VLLM_DISABLE_COMPILE_CACHE=0 (verl sets 1 unless the launch's environment sets it): vLLM
#                  compiles and writes its cache under CACHE_DIR/vllm
#   vllm-cache-2   the same again: vLLM reads that cache (against shipped-warm: what the cache saves)
#   timeline       as shipped, with verl's own ray_kwargs.timeline_json_file: at the end of the run the driver
#                  writes Ray's timeline (every task and actor call, where and how long it ran) -- a profile of
#                  the step's worker calls, not a lever: what of the driver's old log-probs, reference and update
#                  seconds the workers spend running, and what is left for dispatch and transfer
#                  (benchmarks/gpu/ray_timeline.py reads it)
#   profile        as shipped, with verl's own torch profiler on the actor worker for step 4 (global_profiler.tool=
#                  torch, CPU and CUDA activity): one chrome trace of that step's worker calls, the level below
#                  `timeline` -- how much of a call is GPU work, which operators fill the rest
#                  (benchmarks/gpu/torch_trace.py reads it). Not a lever either
#   nocompile      vLLM without torch.compile but with its decode CUDA graphs: compilation_config mode 0 (vLLM's
#                  CompilationMode.NONE) and cudagraph_mode FULL_DECODE_ONLY (verl sets FULL_AND_PIECEWISE unless
#                  engine_kwargs name one). The cold engine init was 38.9 s, 14.7 of it compiling and 12 capturing
#                  graphs; `eager` drops both and its decode graphs with them. A start-up lever whose generation
#                  time counts, against shipped-warm
#   graphs         CUDA graphs for 10 batch sizes (1, 2, 4, ..., 512: verl's rollout.cudagraph_capture_sizes; vLLM
#                  captures 51 by default) and one set of them, not one with and one without the LoRA adapter
#                  (compilation_config cudagraph_specialize_lora false; the adapter is always loaded here). A
#                  start-up lever whose generation time counts, against shipped-warm
#   reward2        reward.num_workers=2: two reward-loop workers (Ray actors) instead of verl's 8, started while the
#                  vLLM server's actor starts; the 512 scores of a step (4 ms each) through two. Against
#                  shipped-warm
#   micro512       the step's 512 responses in one micro batch for the update, the old and the reference
#                  log-probs (the recipe: 128 and 256, so 4 + 2 + 2 passes). The profiled step (`profile`, fifth
#                  sitting) spent 0.14-0.18 s a micro batch, 7-12 ms of it GPU kernels: the rest is per-pass CPU
#                  work, which fewer passes save. A step lever, against shipped-warm; the loss sums the same
#                  tokens in another order, so its rollout-trainer agreement is read as well (a learning claim
#                  needs the canary's contract, not this launch). Measured in the sixth sitting: no gain (not shipped)
#   profile-stack  `profile` with Python's call stacks (verl's tool_config contents `stack`: torch's with_stack):
#                  what the worker's main thread runs outside torch operators -- 0.10-0.12 s of each micro
#                  batch, most of it one stretch after the copy to the GPU that grows with the rows (sixth
#                  sitting), and the worker calls' time outside their stages; torch_trace.py lists the Python
#                  functions by self time. Not a lever
#   rows-on-device verl's FSDP engine as released: its copy of each micro batch to the GPU takes the per-row
#                  non-tensor fields along (the prompt's messages, reward_model, data_source, ...: tensordict
#                  NonTensorStacks, which TensorDict.to() rebuilds row by row). The image's rows-on-host edit
#                  (scripts/patch_verl.py) leaves them out; benchmarks/gpu/verl_trial.py takes it out for this launch
#                  and puts it back after. Measured the other way round in the seventh sitting, before the edit was
#                  shipped (its lever `rows-on-host`: the three training phases 2.76-3.96 s a step against
#                  4.54-5.92 s). A step lever, against shipped-warm
#
# After the last lever the driver's imports are timed (python3 -X importtime, and vLLM's import alone), to split
# the launch-to-Ray phase; not before the first, which would warm the host for shipped-cold (the assets stage, as
# in a user's `make reproduce`, comes first all the same). LEVERS picks and orders the levers (4-6 minutes
# each); `bash startup_levers.sh --print LEVER...` prints each one's `make train` ARGS and runs nothing. Each
# lever's console log and metrics are copied to /root/w/out/levers/<lever>/ as soon as it ends, so a cut-short
# sitting keeps what it finished. Once the sitting's folder is under docs/bench/gpu-data/, its table (start-up
# phases, step 1, the later steps and their generation) is `benchmarks/gpu/levers_table.py FOLDER`; every launch's
# start-up on record, `benchmarks/gpu/startup_table.py`.
# Run detached after the bundle is installed (benchmarks/gpu/bundle_install_and_start.sh with
# JOB=benchmarks/gpu/startup_levers.sh); follow with benchmarks/gpu/job_follow.sh.
set -uo pipefail
STEPS="${STEPS:-5}"
SHORT=(trainer.total_training_steps="$STEPS" trainer.val_before_train=false trainer.test_freq=-1 trainer.save_freq=-1)
# set_lever LEVER: sets `extra` (its verl overrides) and `lever_env` (its environment); returns 2 for an unknown lever
set_lever() {
  extra=() lever_env=() edit_out=""
  case $1 in
    shipped-cold|shipped-warm) ;;
    vllm-cache-1|vllm-cache-2) lever_env=(VLLM_DISABLE_COMPILE_CACHE=0) ;;
    eager) extra=(actor_rollout_ref.rollout.enforce_eager=True) ;;
    lean) extra=(transfer_queue.backend.SimpleStorage.num_data_storage_units=1
                 +ray_kwargs.ray_init.include_dashboard=false) ;;
    poll) extra=(trainer.v1.sampler.custom_sampler.path=pkg://rlrecipes.verl.replay_poll
                 trainer.v1.sampler.custom_sampler.name=PollReplayBuffer
                 +trainer.v1.sampler.sampler_kwargs.poll_interval=0.1) ;;
    awake) extra=(actor_rollout_ref.rollout.free_cache_engine=False) ;;
    agents2) extra=(actor_rollout_ref.rollout.agent.num_workers=2) ;;
    workers0) extra=(data.dataloader_num_workers=0) ;;
    uni) extra=(+actor_rollout_ref.rollout.engine_kwargs.vllm.distributed_executor_backend=uni) ;;
    timeline) extra=(ray_kwargs.timeline_json_file=/root/w/out/levers/timeline/ray-timeline.json) ;;
    profile|profile-stack)  # the same profile; profile-stack adds Python's call stacks
      local contents=cpu,cuda; [ "$1" = profile-stack ] && contents+=,stack
      extra=(global_profiler.tool=torch 'global_profiler.steps=[4]'
             global_profiler.save_path="/root/w/out/levers/$1/trace"
             actor_rollout_ref.actor.profiler.enable=True actor_rollout_ref.actor.profiler.all_ranks=True
             "actor_rollout_ref.actor.profiler.tool_config.torch.contents=[$contents]") ;;
    nocompile) extra=(+actor_rollout_ref.rollout.engine_kwargs.vllm.compilation_config.mode=0
                      +actor_rollout_ref.rollout.engine_kwargs.vllm.compilation_config.cudagraph_mode=FULL_DECODE_ONLY) ;;
    graphs) extra=('actor_rollout_ref.rollout.cudagraph_capture_sizes=[1,2,4,8,16,32,64,128,256,512]'
                   +actor_rollout_ref.rollout.engine_kwargs.vllm.compilation_config.cudagraph_specialize_lora=false) ;;
    reward2) extra=(reward.num_workers=2) ;;
    micro512) extra=(actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=512
                     actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=512
                     actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=512) ;;
    rows-on-device) edit_out=rows-on-host ;;  # the image's edit taken out for this launch (verl_trial.py)
    *) return 2 ;;
  esac
}
# LEVERS's default: every lever, those not measured yet first
DEFAULT_LEVERS="shipped-cold shipped-warm rows-on-device profile-stack nocompile graphs reward2 eager vllm-cache-1"
DEFAULT_LEVERS+=" vllm-cache-2 micro512 profile timeline"
DEFAULT_LEVERS+=" awake lean agents2 poll uni workers0"
# --print [LEVER...]: each lever's whole ARGS of `make train` on one line, every lever of the default order without
# names (tests validate them against verl 0.9.1's schema on a CPU host, so a misspelled key costs no GPU time);
# nothing else runs
if [ "${1:-}" = --print ]; then
  shift
  [ $# -gt 0 ] || read -ra names <<< "$DEFAULT_LEVERS"
  for name in "${@:-${names[@]}}"; do
    set_lever "$name" || { echo "$name: unknown lever" >&2; exit 2; }
    echo "$name ${SHORT[*]}${extra[*]+ ${extra[*]}}"
  done
  exit 0
fi
W=/root/w/levers
# shellcheck source=benchmarks/gpu/canary_recovery_common.sh
. /root/repo/benchmarks/gpu/canary_recovery_common.sh
record_env > "$O/env.txt" 2>&1
# verl's Ray runtime env sets VLLM_LOGGING_LEVEL=WARN unless the launch's environment sets it, which hides vLLM's own
# start-up timings; at INFO the console logs them (model load, torch.compile, memory profiling, CUDA-graph capture,
# engine init), splitting the rollout phase. Logging only: every lever gets it, shipped-cold included.
export VLLM_LOGGING_LEVEL=INFO
read -ra levers <<< "${LEVERS:-$DEFAULT_LEVERS}"

stamp "assets"
python3 -m rlrecipes stage --recipe "$RECIPE" --profile "$PROFILE" assets > "$O/assets.log" 2>&1
stamp "assets: exit $?"

for lever in "${levers[@]}"; do
  set_lever "$lever" || { stamp "$lever: unknown lever, skipped"; continue; }
  stamp "$lever: make train ${SHORT[*]} ${extra[*]-} ${lever_env[*]-}"
  mkdir -p "$O/levers/$lever"  # before the launch: `timeline` and `profile` write into it
  if [ -n "$edit_out" ]; then  # its status line (REVERTED) goes with the lever's logs
    python3 benchmarks/gpu/verl_trial.py "$edit_out" --revert > "$O/levers/$lever/verl-trial.txt" 2>&1 \
      || { stamp "$lever: verl edit $edit_out not taken out, skipped"; continue; }
  fi
  env ${lever_env[@]+"${lever_env[@]}"} CKPT_DIR="$W/ckpt-$lever" LOG_DIR="$W/logs-$lever" \
    make train RECIPE="$RECIPE" PROFILE="$PROFILE" ARGS="${SHORT[*]} ${extra[*]-}" > "$O/$lever.log" 2>&1
  code=$?
  [ -z "$edit_out" ] || python3 benchmarks/gpu/verl_trial.py "$edit_out" >> "$O/levers/$lever/verl-trial.txt" 2>&1
  gzip -f "$O/levers/$lever"/ray-timeline.json 2>/dev/null
  cp "$W/logs-$lever/$RECIPE"/console-*.log "$W/logs-$lever/$RECIPE"/metrics-*.jsonl "$O/levers/$lever/" 2>/dev/null
  [ ! -d "$O/levers/$lever/trace" ] || bash benchmarks/gpu/read_traces.sh > /dev/null 2>&1  # a profile's reading
  stamp "$lever: exit $code; $(grep -ac 'step:[0-9]' "$O/levers/$lever"/console-*.log 2>/dev/null || echo 0) step line(s)"
  sleep 10  # the GPU memory the launch frees, as the next one finds it
done
# What "launch to Ray started" holds before Ray: the driver's imports (verl's main_ppo; vLLM, as its workers
# import it), on the host the levers have warmed.
stamp "imports"
python3 -X importtime -c 'import verl.trainer.main_ppo' 2> "$O/importtime-main_ppo.txt"
python3 -c "import time; t = time.perf_counter(); import vllm; print(f'{time.perf_counter() - t:.1f} s')" \
  > "$O/import-vllm.txt" 2>/dev/null
stamp "all done"
touch "$O/DONE"

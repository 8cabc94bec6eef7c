#!/usr/bin/env bash
# GPU: the learning canary on the Hopper stack (verl 0.9.1, vLLM 0.24 rollout, the LoRA adapter synced into
# vLLM at every step) through `make reproduce`, the command a user runs, then (RUNS) its negative controls the
# same way. The bundle is installed in /root/site and the repository copied to /root/repo by
# benchmarks/gpu/bundle_install_and_start.sh (JOB=benchmarks/gpu/canary_hopper_stack.sh); this job outlives the script that starts it.
#
#   canary    canary-grpo-lora on any-1gpu-hopper, as shipped, from nothing: `make reproduce` builds its assets,
#             so the timeline's "canary" span is the whole canary, start-up included
#   frozen    the same, with the adapter sync to vLLM cut (RLRECIPES_FREEZE_ROLLOUT_ADAPTER=1, benchmarks/gpu/site):
#             vLLM keeps the first (B = 0) adapter, so the rollout samples the warm start all run long
#   shuffled  the same, with the reward that ignores the answer (rlrecipes/smoke/shuffled_reward.py)
#
# RUNS picks them (default: all three), run one after the other. Run side by side on one H200 (2026-12-03,
# each vLLM engine at 0.25 of the memory), the third engine to start found no memory for its KV cache: vLLM
# sizes its cache from what the whole GPU has free while it profiles, and the other two were allocating at
# that moment. Each run is a reproduce of its own (LOG_DIR, CKPT_DIR, MODELS_DIR, REPORTS_DIR); the controls
# copy the canary's assets, so their assets stage finds them complete.
set -uo pipefail
cd /root/repo || exit 2
mkdir -p /root/bin
printf '#!/bin/sh\nexec python3 -m rlrecipes "$@"\n' > /root/bin/rlrecipes && chmod +x /root/bin/rlrecipes
export PATH="/root/bin:$PATH" PYTHONPATH="/root/site:/root/repo:/root/repo/benchmarks/gpu/site" PYTHONUNBUFFERED=1 \
  RAY_DEDUP_LOGS=0 WANDB_MODE=offline HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
  VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 TOKENIZERS_PARALLELISM=false
ulimit -n 65536 || true
O=/root/w/out; W=/root/w; mkdir -p "$O"
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$O/timeline.txt"; }
RECIPE=canary-grpo-lora PROFILE=any-1gpu-hopper
read -ra OVERRIDES <<< "${EXTRA_ARGS:-}"  # Hydra overrides for every run, e.g. a shorter control

stamp "versions"
{ nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv
  python3 -c "import sys, torch, vllm, verl, transformers, peft, ray; print(sys.version.split()[0], 'torch', torch.__version__, 'vllm', vllm.__version__, 'verl', verl.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__, 'ray', ray.__version__)"
  python3 scripts/patch_verl.py --image hopper
} > "$O/env.txt" 2>&1
cat "$O/env.txt"

read -ra runs <<< "${RUNS:-canary frozen shuffled}"
# make's reproduce target inside the image (RLRECIPES_IN_IMAGE=1: scripts/in-image.sh runs the entry point
# directly); the CLI itself where this host has no make.
reproduce() {
  if command -v make >/dev/null; then
    RLRECIPES_IN_IMAGE=1 make reproduce RECIPE="$RECIPE" PROFILE="$PROFILE" ARGS="${OVERRIDES[*]-}"
  else
    python3 -m rlrecipes reproduce "$RECIPE" --profile "$PROFILE" ${OVERRIDES[@]+"${OVERRIDES[@]}"}
  fi
}
echo "reproduce through: $(command -v make >/dev/null && echo make || echo 'python3 -m rlrecipes (no make here)')" >> "$O/env.txt"

for name in "${runs[@]}"; do
  r="$W/$name"; mkdir -p "$r"
  if [ "$name" != canary ]; then
    [ -d "$W/canary/models" ] || { stamp "$name: skipped (no canary assets to copy)"; continue; }
    cp -a "$W/canary/models" "$W/canary/data" "$r/"
    rm -rf "$r/models/canary-grpo-lora-merged"
  fi
  env=(MODELS_DIR="$r/models" DATA_DIR="$r/data" CKPT_DIR="$r/ckpt" LOG_DIR="$r/logs" REPORTS_DIR="$r/reports"
       CACHE_DIR="$r/cache")
  case $name in
    canary) env+=(RLRECIPES_PHASE_LOG="$r/phases.jsonl") ;;
    frozen) env+=(RLRECIPES_FREEZE_ROLLOUT_ADAPTER=1) ;;
    shuffled) env+=(REWARD_FN="$PWD/rlrecipes/smoke/shuffled_reward.py") ;;
  esac
  stamp "$name: reproduce"
  (export "${env[@]}"; reproduce) > "$r/reproduce.log" 2>&1
  rc=$?  # before any other expansion: a $(...) in the same line would reset $?
  stamp "$name: reproduce exit $rc"
  nvidia-smi --query-gpu=memory.used --format=csv >> "$O/env.txt" 2>&1
done
stamp "all done"
tar -czf "$O/runs.tgz" -C "$W" --exclude='*.safetensors' --exclude='*.pt' --exclude='*.parquet' --exclude='*.bin' \
  --exclude='data' "${runs[@]}" 2>/dev/null
touch "$O/DONE"

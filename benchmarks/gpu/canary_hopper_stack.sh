#!/usr/bin/env bash
# GPU: the learning canary on the Hopper stack (verl 0.9.1, vLLM 0.24 rollout, the LoRA adapter synced into
# vLLM at every step) through `rlrecipes reproduce`, the command a user runs, then its two negative controls
# the same way. The bundle is installed in /root/site and the repository copied to /root/repo by
# benchmarks/gpu/bundle_install_and_start.sh (JOB=benchmarks/gpu/canary_hopper_stack.sh); this job outlives the call that starts it.
#
#   canary    canary-grpo-lora on any-1gpu-hopper, as shipped
#   frozen    the same, with the adapter sync to vLLM cut (RLRECIPES_FREEZE_ROLLOUT_ADAPTER=1, benchmarks/gpu/site):
#             vLLM keeps the first (B = 0) adapter, so the rollout samples the warm start all run long
#   shuffled  the same, with the reward that ignores the answer (rlrecipes/smoke/shuffled_reward.py)
#
# The three run one after the other. Run side by side on one H200 (2026-12-03, each vLLM engine at 0.25 of the
# memory), the third engine to start found no memory for its KV cache: vLLM sizes its cache from what the
# whole GPU has free while it profiles, and the other two were allocating at that moment. Each run is a
# reproduce of its own (LOG_DIR, CKPT_DIR, MODELS_DIR, REPORTS_DIR); the canary assets are built once and
# copied into each, so the reproduce assets stage finds them complete.
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
OVERRIDES=()

stamp "versions"
{ nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv
  python3 -c "import sys, torch, vllm, verl, transformers, peft, ray; print(sys.version.split()[0], 'torch', torch.__version__, 'vllm', vllm.__version__, 'verl', verl.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__, 'ray', ray.__version__)"
  python3 scripts/patch_verl.py --image hopper
} > "$O/env.txt" 2>&1
cat "$O/env.txt"

stamp "canary assets"
python3 -m rlrecipes canary-assets --models-dir "$W/assets/models" --data-dir "$W/assets/data" > "$W/assets.log" 2>&1 \
  || { stamp "canary-assets failed"; tail -20 "$W/assets.log"; touch "$O/DONE"; exit 1; }
stamp "preflight"
MODELS_DIR="$W/assets/models" DATA_DIR="$W/assets/data" \
  python3 -m rlrecipes preflight "$RECIPE" --profile "$PROFILE" ${OVERRIDES[@]+"${OVERRIDES[@]}"} > "$O/preflight.txt" 2>&1
tail -25 "$O/preflight.txt"

stamp "reproduce, one run after the other"
for name in canary frozen shuffled; do
  r="$W/$name"; mkdir -p "$r"; cp -a "$W/assets/models" "$W/assets/data" "$r/"
  env=(MODELS_DIR="$r/models" DATA_DIR="$r/data" CKPT_DIR="$r/ckpt" LOG_DIR="$r/logs" REPORTS_DIR="$r/reports")
  case $name in
    canary) env+=(RLRECIPES_PHASE_LOG="$r/phases.jsonl") ;;
    frozen) env+=(RLRECIPES_FREEZE_ROLLOUT_ADAPTER=1) ;;
    shuffled) env+=(REWARD_FN="$PWD/rlrecipes/smoke/shuffled_reward.py") ;;
  esac
  env "${env[@]}" python3 -m rlrecipes reproduce "$RECIPE" --profile "$PROFILE" ${OVERRIDES[@]+"${OVERRIDES[@]}"} > "$r/reproduce.log" 2>&1
  rc=$?  # before any other expansion: a $(...) in the same line would reset $?
  stamp "$name: reproduce exit $rc"
done
stamp "all done"
tar -czf "$O/runs.tgz" -C "$W" --exclude='*.safetensors' --exclude='*.pt' --exclude='*.parquet' --exclude='*.bin' \
  --exclude='models' --exclude='data' assets.log canary frozen shuffled 2>/dev/null
touch "$O/DONE"

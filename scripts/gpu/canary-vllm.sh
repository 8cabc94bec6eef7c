#!/usr/bin/env bash
# GPU: the learning canary on the Hopper stack (verl 0.9.1, vLLM 0.24 rollout, the LoRA adapter synced into
# vLLM at every step) through `rlrecipes reproduce`, the command a user runs, with its two negative controls
# sharing the GPU. The bundle is installed in /root/site and the repository copied to /root/repo by
# scripts/gpu/hopper-start.sh (JOB=scripts/gpu/canary-vllm.sh); this job outlives the call that starts it.
#
#   canary    canary-grpo-lora on any-1gpu-hopper, as shipped
#   frozen    the same, with the adapter sync to vLLM cut (RLRECIPES_FREEZE_ROLLOUT_ADAPTER=1, scripts/gpu/site):
#             vLLM keeps the first (B = 0) adapter, so the rollout samples the warm start all run long
#   shuffled  the same, with the reward that ignores the answer (rlrecipes/smoke/shuffled_reward.py)
#
# The three share one H200: each vLLM engine gets 0.25 of its memory (OVERRIDES), the only change from the
# shipped profile. Each run is a reproduce of its own (LOG_DIR, CKPT_DIR, MODELS_DIR, REPORTS_DIR); the canary
# assets are built once and copied into each, so the reproduce assets stage finds them complete.
set -uo pipefail
cd /root/repo || exit 2
mkdir -p /root/bin
printf '#!/bin/sh\nexec python3 -m rlrecipes "$@"\n' > /root/bin/rlrecipes && chmod +x /root/bin/rlrecipes
export PATH="/root/bin:$PATH" PYTHONPATH="/root/site:/root/repo:/root/repo/scripts/gpu/site" PYTHONUNBUFFERED=1 \
  RAY_DEDUP_LOGS=0 WANDB_MODE=offline HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
  VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 TOKENIZERS_PARALLELISM=false
ulimit -n 65536 || true
O=/root/w/out; W=/root/w; mkdir -p "$O"
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$O/timeline.txt"; }
RECIPE=canary-grpo-lora PROFILE=any-1gpu-hopper
OVERRIDES=(actor_rollout_ref.rollout.gpu_memory_utilization=0.25)

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
python3 -m rlrecipes preflight "$RECIPE" --profile "$PROFILE" "${OVERRIDES[@]}" > "$O/preflight.txt" 2>&1
tail -25 "$O/preflight.txt"

stamp "reproduce x3"
for name in canary frozen shuffled; do
  r="$W/$name"; mkdir -p "$r"; cp -a "$W/assets/models" "$W/assets/data" "$r/"
  env=(MODELS_DIR="$r/models" DATA_DIR="$r/data" CKPT_DIR="$r/ckpt" LOG_DIR="$r/logs" REPORTS_DIR="$r/reports")
  case $name in
    canary) env+=(RLRECIPES_PHASE_LOG="$r/phases.jsonl") ;;
    frozen) env+=(RLRECIPES_FREEZE_ROLLOUT_ADAPTER=1) ;;
    shuffled) env+=(REWARD_FN="$PWD/rlrecipes/smoke/shuffled_reward.py") ;;
  esac
  ( env "${env[@]}" python3 -m rlrecipes reproduce "$RECIPE" --profile "$PROFILE" "${OVERRIDES[@]}" > "$r/reproduce.log" 2>&1
    echo "[$(( $(date +%s) - T0 ))s] $name: reproduce exit $?" >> "$O/timeline.txt" ) &
  sleep 20  # stagger the vLLM engines' start (each measures free memory)
done
wait
stamp "all done"
tar -czf "$O/runs.tgz" -C "$W" --exclude='*.safetensors' --exclude='*.pt' --exclude='*.parquet' --exclude='*.bin' \
  --exclude='models' --exclude='data' assets.log canary frozen shuffled 2>/dev/null
touch "$O/DONE"

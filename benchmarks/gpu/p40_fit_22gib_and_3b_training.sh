#!/usr/bin/env bash
# GPU run 2 (on the GPU host: repo root, wheels in .whl/): install + patch the verl 0.5.0 stack, then
# at once: the smoke run again (after the metric-parser fix), the P40 fit proof at a tighter 22 GiB
# cap, and the A100 GRPO-LoRA recipe's training side (3B architecture, LoRA, 80 GiB cap, HF rollout).
# Writes its results into RESULTS (default /tmp/results): the timeline, the logs, the smoke summary, logs.tgz.
set -uo pipefail
export PYTHONUNBUFFERED=1 RAY_DEDUP_LOGS=0 WANDB_MODE=offline HF_HUB_OFFLINE=1
RESULTS="${RESULTS:-/tmp/results}"
W=/tmp/w
mkdir -p "$RESULTS" "$W"
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$RESULTS/timeline.txt"; }

stamp "install wheels, patch verl"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > "$W/pip.log" 2>&1 || { cat "$W/pip.log"; exit 1; }
export PYTHONPATH="/tmp/site:$PWD"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; python3 scripts/patch_verl.py --image p40; } \
  > "$RESULTS/env.txt" 2>&1
tail -1 "$RESULTS/env.txt"
python3 -m rlrecipes smoke-assets --out "$W/assets" > "$W/assets.log" 2>&1 || { cat "$W/assets.log"; exit 1; }

stamp "start: smoke | fit 0.5B @22GiB | fit 3B LoRA @80GiB"
( timeout 560 python3 -m rlrecipes smoke --work "$W/smoke" --assets "$W/assets" --timeout 170 > "$RESULTS/smoke.log" 2>&1
  echo "smoke exit $?" >> "$RESULTS/smoke.log" ) &
SMOKE=$!
( PYTHONPATH="$PWD/benchmarks/gpu/site:$PYTHONPATH" python3 benchmarks/gpu/memory_fit.py qwen2.5-0.5b-gsm8k-ppo \
    --arch qwen2.5-0.5b --assets "$W/fit-assets" --work "$W/fit" --cap-gib 22 --steps 4 --timeout 420 \
    > "$RESULTS/fit.log" 2>&1; echo "fit exit $?" >> "$RESULTS/fit.log" ) &
FIT=$!
( python3 -m rlrecipes smoke-assets --out "$W/fit3b-assets" --arch qwen2.5-3b --dtype bfloat16 --train-rows 256 \
    > "$RESULTS/fit3b.log" 2>&1 &&
  PYTHONPATH="$PWD/benchmarks/gpu/site:$PYTHONPATH" python3 benchmarks/gpu/memory_fit.py qwen2.5-3b-gsm8k-grpo-lora \
    --profile any-1gpu --arch qwen2.5-3b --weights-dtype bfloat16 --assets "$W/fit3b-assets" --work "$W/fit3b" \
    --cap-gib 80 --steps 2 --timeout 400 \
    +actor_rollout_ref.model.override_config._attn_implementation=sdpa \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=32 \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=32 \
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=32 \
    actor_rollout_ref.model.enable_gradient_checkpointing=true \
    '+actor_rollout_ref.actor.fsdp_config.mixed_precision={param_dtype:bf16,reduce_dtype:fp32,buffer_dtype:fp32}' \
    +actor_rollout_ref.ref.fsdp_config.model_dtype=bf16 \
    data.train_batch_size=32 actor_rollout_ref.actor.ppo_mini_batch_size=32 \
    >> "$RESULTS/fit3b.log" 2>&1; echo "fit3b exit $?" >> "$RESULTS/fit3b.log" ) &
FIT3B=$!
wait $FIT; stamp "fit done"
wait $FIT3B; stamp "fit3b done"
wait $SMOKE; stamp "smoke done"

cp "$W/smoke/summary.json" "$RESULTS/smoke-summary.json" 2>/dev/null
tar -czf "$RESULTS/logs.tgz" -C "$W" --exclude='*.safetensors' --exclude='*.pt' --exclude='*.parquet' \
  smoke/logs fit/logs fit/fit-qwen2.5-0.5b-gsm8k-ppo.json fit/phases-qwen2.5-0.5b-gsm8k-ppo.jsonl \
  fit3b/logs fit3b/fit-qwen2.5-3b-gsm8k-grpo-lora.json fit3b/phases-qwen2.5-3b-gsm8k-grpo-lora.jsonl \
  assets.log pip.log 2>/dev/null
echo "=== fit";   tail -22 "$RESULTS/fit.log"
echo "=== fit3b"; tail -22 "$RESULTS/fit3b.log"
echo "=== smoke"; tail -18 "$RESULTS/smoke.log"
stamp "end"

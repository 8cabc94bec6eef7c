#!/usr/bin/env bash
# GPU run 3 (on the GPU host: repo root, wheels in .whl/): the A100 GRPO-LoRA recipe's training side
# alone: 3B architecture (random bf16 weights), LoRA rank 64, the a100-80gb profile's per-GPU micro
# batches (32) and gradient checkpointing, an 80 GiB allocator cap, on the patched verl 0.5.0 stack
# (HF generate rollout, SDPA attention, no padding removal: flash-attn is not on this host).
# Writes its results into RESULTS (default /tmp/results): the timeline, fit3b.log and logs.tgz.
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
python3 scripts/patch_verl.py --image p40 | tail -1
stamp "3B assets"
python3 -m rlrecipes smoke-assets --out "$W/fit3b-assets" --arch qwen2.5-3b --dtype bfloat16 --train-rows 256 \
  > "$RESULTS/fit3b.log" 2>&1 || { cat "$RESULTS/fit3b.log"; exit 1; }
stamp "3B fit"
PYTHONPATH="$PWD/benchmarks/gpu/site:$PYTHONPATH" timeout 500 python3 benchmarks/gpu/memory_fit.py qwen2.5-3b-gsm8k-grpo-lora \
  --profile any-1gpu --arch qwen2.5-3b --weights-dtype bfloat16 --assets "$W/fit3b-assets" --work "$W/fit3b" \
  --cap-gib 80 --steps 2 --timeout 440 \
  +actor_rollout_ref.model.override_config._attn_implementation=sdpa \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=32 \
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=32 \
  actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=32 \
  actor_rollout_ref.model.enable_gradient_checkpointing=true \
  '+actor_rollout_ref.actor.fsdp_config.mixed_precision={param_dtype:bf16,reduce_dtype:fp32,buffer_dtype:fp32}' \
  +actor_rollout_ref.ref.fsdp_config.model_dtype=bf16 \
  data.train_batch_size=32 actor_rollout_ref.actor.ppo_mini_batch_size=32 \
  >> "$RESULTS/fit3b.log" 2>&1
echo "fit3b exit $?" >> "$RESULTS/fit3b.log"
stamp "fit3b done"
tar -czf "$RESULTS/logs.tgz" -C "$W" fit3b/logs fit3b/fit-qwen2.5-3b-gsm8k-grpo-lora.json \
  fit3b/phases-qwen2.5-3b-gsm8k-grpo-lora.jsonl 2>/dev/null
tail -30 "$RESULTS/fit3b.log"
stamp "end"

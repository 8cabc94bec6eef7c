#!/usr/bin/env bash
# The Hopper stack's GPU proof on the H200 host (offline; verl 0.9.1 + vLLM 0.24.0 + transformers 5.9.0 from the
# offline bundle in /root/site, the machine's torch 2.11.0+cu130): `rlrecipes smoke` for smoke-grpo-lora,
# then smoke-ppo, on profile any-1gpu-vllm (vLLM rollout, BF16, SDPA) plus the overrides below.
#   actor_rollout_ref.actor.strategy=fsdp2 / critic.strategy=fsdp2: with FSDP1 (verl's default `fsdp`)
#     and peft >= 0.21 the LoRA adapter reaches vLLM empty (docs/bench/gpu-hopper.md says why);
#   actor_rollout_ref.rollout.enforce_eager=true: no torch.compile / CUDA graphs (start-up time; a rig check).
# and scripts/patch_verl.py --image hopper on the installed verl (its critic forces flash-attn: verl #5210; vLLM's
# per-token detokenization off in the rollout: verl PR #7679).
# RECIPES picks the smoke recipes (default: both).
set -uo pipefail
cd /root/repo || exit 2
export PYTHONPATH="/root/site:/root/repo" PYTHONUNBUFFERED=1 RAY_DEDUP_LOGS=0 WANDB_MODE=offline \
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
O=/root/w/out; W=/root/w; mkdir -p "$O"
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$O/timeline.txt"; }
FIX=(actor_rollout_ref.actor.strategy=fsdp2 critic.strategy=fsdp2 actor_rollout_ref.rollout.enforce_eager=true)

stamp "versions"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import sys, torch, vllm, verl, transformers, peft, ray, tensordict; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'vllm', vllm.__version__, 'verl', verl.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__, 'ray', ray.__version__, 'tensordict', tensordict.__version__)"
  python3 -c "import verl.trainer.main_ppo, vllm.entrypoints.openai.api_server; print('imports ok')"
} > "$O/versions.txt" 2>&1
tail -3 "$O/versions.txt"
python3 -m pip list --path /root/site --format=freeze > "$O/site-freeze.txt" 2>/dev/null
python3 scripts/patch_verl.py --image hopper | tee -a "$O/versions.txt"
python3 -m rlrecipes smoke-assets --out "$W/assets" > "$O/assets.txt" 2>&1 || { stamp "smoke-assets failed"; touch "$O/DONE"; exit 1; }

for R in ${RECIPES:-smoke-grpo-lora smoke-ppo}; do
  stamp "start $R"
  timeout 1100 python3 -m rlrecipes smoke --work "$W/$R" --assets "$W/assets" --recipe "$R" \
    --profile any-1gpu-vllm --timeout 480 "${FIX[@]}" > "$O/$R.log" 2>&1
  stamp "end $R: exit $?"
  cp "$W/$R/summary.json" "$O/$R-summary.json" 2>/dev/null
done
touch "$O/DONE"

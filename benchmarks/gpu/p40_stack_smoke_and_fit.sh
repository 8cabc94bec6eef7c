#!/usr/bin/env bash
# GPU run 1 (on the GPU host: repo root, wheels in .whl/): install the verl 0.5.0 stack, patch it,
# then at once: the smoke run (kill/resume/merge), the unpatched-failure demos, the P40 fit proof.
# Writes its results into RESULTS (default /tmp/results): the timeline, the logs, the smoke summary, logs.tgz.
set -uo pipefail
export PYTHONUNBUFFERED=1 RAY_DEDUP_LOGS=0 WANDB_MODE=offline HF_HUB_OFFLINE=1
RESULTS="${RESULTS:-/tmp/results}"
W=/tmp/w
mkdir -p "$RESULTS" "$W"
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$RESULTS/timeline.txt"; }

stamp "install wheels"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > "$W/pip.log" 2>&1 || { cat "$W/pip.log"; exit 1; }
export PYTHONPATH="/tmp/site:$PWD"
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv
  python3 -c 'import sys, torch, transformers, verl, ray, peft, tensordict; print("python", sys.version.split()[0]); [print(m.__name__, m.__version__) for m in (torch, transformers, verl, ray, peft, tensordict)]; print("cuda", torch.version.cuda)'
  python3 -c 'import importlib.util as u; print("flash_attn installed:", u.find_spec("flash_attn") is not None, "| vllm installed:", u.find_spec("vllm") is not None)'
} > "$RESULTS/env.txt" 2>&1
cat "$RESULTS/env.txt"

stamp "copies of verl for the demos, then patch the installed verl"
for v in pristine no-critic-attn no-nn; do mkdir -p "$W/verl-$v" && cp -r /tmp/site/verl "$W/verl-$v/"; done
python3 scripts/patch_verl.py --image p40 --verl-root "$W/verl-no-critic-attn/verl" --skip critic-attn-implementation \
  --skip valuehead-token-classification-attn --skip valuehead-causal-lm-attn > "$W/patch-demos.log" 2>&1
python3 scripts/patch_verl.py --image p40 --verl-root "$W/verl-no-nn/verl" --skip rollout-num-return-sequences >> "$W/patch-demos.log" 2>&1
python3 scripts/patch_verl.py --image p40 2>&1 | tee "$RESULTS/patch.log"
python3 scripts/patch_verl.py --image p40 2>&1 | tail -1 | tee -a "$RESULTS/patch.log"   # idempotent: second run changes nothing
cat "$W/patch-demos.log" >> "$RESULTS/patch.log"

stamp "assets (tiny + qwen2.5-0.5b architecture)"
python3 -m rlrecipes smoke-assets --out "$W/assets" > "$W/assets.log" 2>&1 || { cat "$W/assets.log"; exit 1; }

stamp "start: smoke | demos | fit"
( timeout 570 python3 -m rlrecipes smoke --work "$W/smoke" --assets "$W/assets" --timeout 170 > "$RESULTS/smoke.log" 2>&1; echo "smoke exit $?" >> "$RESULTS/smoke.log" ) &
SMOKE=$!
( python3 benchmarks/gpu/p40_unpatched_failures.py --assets "$W/assets" --work "$W/demos" --timeout 200 \
    "pristine:smoke-ppo:$W/verl-pristine" "no-critic-attn:smoke-ppo:$W/verl-no-critic-attn" \
    "no-nn:smoke-grpo-lora:$W/verl-no-nn" > "$RESULTS/demos.log" 2>&1 ) &
DEMOS=$!
( PYTHONPATH="$PWD/benchmarks/gpu/site:$PYTHONPATH" python3 benchmarks/gpu/memory_fit.py qwen2.5-0.5b-gsm8k-ppo \
    --arch qwen2.5-0.5b --assets "$W/fit-assets" --work "$W/fit" --cap-gib 24 --steps 4 --timeout 420 \
    > "$RESULTS/fit.log" 2>&1; echo "fit exit $?" >> "$RESULTS/fit.log" ) &
FIT=$!
wait $DEMOS; stamp "demos done"
wait $FIT; stamp "fit done"
wait $SMOKE; stamp "smoke done"

cp "$W/smoke/summary.json" "$RESULTS/smoke-summary.json" 2>/dev/null
tar -czf "$RESULTS/logs.tgz" -C "$W" --exclude='*.safetensors' --exclude='*.pt' --exclude='*.parquet' \
  smoke/logs demos fit/logs fit/fit-qwen2.5-0.5b-gsm8k-ppo.json fit/phases-qwen2.5-0.5b-gsm8k-ppo.jsonl \
  assets.log pip.log 2>/dev/null
echo "=== demos"; tail -20 "$RESULTS/demos.log"
echo "=== fit";   tail -25 "$RESULTS/fit.log"
echo "=== smoke"; tail -25 "$RESULTS/smoke.log"
stamp "end"

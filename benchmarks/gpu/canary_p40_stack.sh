#!/usr/bin/env bash
# GPU: the learning canary on the P40 stack (verl 0.5.0 + scripts/patch_verl.py --image p40 + HF rollout), on a
# host without internet. Run from the repo root, the offline wheel bundle in .bundle/ (see
# docs/bench/gpu-canary.md for how it was packed).
#
#   bash benchmarks/gpu/canary_p40_stack.sh SECONDS NAME:RECIPE[:REWARD]:OVERRIDE,OVERRIDE... [...]
#
# builds the canary assets once (rlrecipes canary-assets: SFT warm start, held-out start accuracy), then
# trains every NAME at the same time, each through its generated launcher (recipes/RECIPE.sh) with its own
# CKPT_DIR/LOG_DIR, stops each after SECONDS, merges the last checkpoint of each and runs the fast
# held-out eval on the merged model (and on the base: the warm start). REWARD: `shuffled` uses
# rlrecipes/smoke/shuffled_reward.py (the negative control) instead of the GSM8K scorer.
# Writes its results into RESULTS (default /tmp/results): the timeline, env.txt, the canary manifest and
# runs.tgz (every run's logs, merge and eval; no weights, no data).
set -uo pipefail
export PYTHONUNBUFFERED=1 RAY_DEDUP_LOGS=0 WANDB_MODE=offline HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
RESULTS="${RESULTS:-/tmp/results}"
W=/tmp/w
mkdir -p "$RESULTS" "$W"
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$RESULTS/timeline.txt"; }
seconds=${1:?usage: canary_p40_stack.sh SECONDS NAME:RECIPE[:REWARD]:OVERRIDES ...}
shift

stamp "install the bundle"
if [ ! -d /tmp/site/verl ]; then
    python3 scripts/wheel_bundle.py install .bundle --target /tmp/site > "$W/pip.log" 2>&1 || { tail -20 "$W/pip.log"; exit 1; }
fi
export PYTHONPATH="/tmp/site:$PWD"
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv
  python3 -c 'import sys, torch, transformers, verl, ray, peft; print("python", sys.version.split()[0]); [print(m.__name__, m.__version__) for m in (torch, transformers, verl, ray, peft)]'
  python3 scripts/patch_verl.py --image p40 2>&1 | tail -2
} > "$RESULTS/env.txt" 2>&1
cat "$RESULTS/env.txt"

stamp "canary assets (SFT warm start)"
python3 -m rlrecipes canary-assets --out "$W/assets" 2>&1 | tee "$W/assets.log" | grep -v "^sft " || true
cp "$W/assets/models/canary-qwen2/canary-manifest.json" "$RESULTS/" 2>/dev/null || { cat "$W/assets.log"; exit 1; }

stamp "train: $*"
pids=()
for spec in "$@"; do
    IFS=: read -r name recipe reward overrides <<<"$spec"
    reward_fn=$PWD/rlrecipes/rewards/gsm8k.py
    [ "$reward" = shuffled ] && reward_fn=$PWD/rlrecipes/smoke/shuffled_reward.py
    IFS=, read -r -a extra <<<"$overrides"
    mkdir -p "$W/runs/$name"
    ( MODELS_DIR="$W/assets/models" DATA_DIR="$W/assets/data" CKPT_DIR="$W/runs/$name/ckpt" LOG_DIR="$W/runs/$name/logs" \
        REWARD_FN="$reward_fn" timeout -s TERM "$seconds" bash "recipes/$recipe.sh" ray_init.num_cpus=3 "${extra[@]}" \
        > "$W/runs/$name/train.out" 2>&1
      echo "$name exit $? after $(( $(date +%s) - T0 ))s" >> "$RESULTS/timeline.txt" ) &
    pids+=($!)
done
wait "${pids[@]}"
stamp "trained"

for spec in "$@"; do
    IFS=: read -r name recipe reward overrides <<<"$spec"
    r="$W/runs/$name"
    python3 -m rlrecipes merge "$r/ckpt/$recipe" --recipe "$recipe" --out "$r/merged" --base "$W/assets/models/canary-qwen2" \
        > "$r/merge.log" 2>&1 || { echo "$name merge failed"; tail -5 "$r/merge.log"; continue; }
    python3 -m rlrecipes eval "$r/merged" --skip-lm-eval --fast-data "$W/assets/data/canary-gsm8k/test.parquet" \
        --max-new-tokens 64 --fast-batch-size 256 --out "$r/eval" > "$r/eval.log" 2>&1 || { echo "$name eval failed"; tail -5 "$r/eval.log"; }
    echo "== $name"; tail -8 "$r/eval.log"
done
stamp "merged + evaluated"
tar -czf "$RESULTS/runs.tgz" -C "$W" --exclude='*.safetensors' --exclude='*.pt' --exclude='*.parquet' --exclude='*.bin' \
    runs assets.log 2>/dev/null
stamp "end"

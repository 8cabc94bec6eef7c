#!/usr/bin/env bash
# Sourced by benchmarks/gpu/recovery_canary.sh, recovery_faults.sh, startup_levers.sh, canary_seeds.sh and
# canary_starts.sh, with W (their work folder) set: the image's environment on the GPU host (the installed bundle
# in HOST_ROOT/site, the repository in HOST_ROOT/repo, the entry point run directly from HOST_ROOT/bin, unless a
# stand-in is already there), the canary's folders under W, the timeline in HOST_ROOT/w/out, and how they read a
# run's state. HOST_ROOT is /root on a GPU host; tests/repo/test_gpu_seed_runner.py rehearses canary_seeds.sh in a
# folder of its own. Sets O, RECIPE, PROFILE, SEED, SEEDED, CK, LG and T0; defines stamp, last_step, tracker,
# seed_assets, record_env.
HOST_ROOT="${HOST_ROOT:-/root}"
cd "$HOST_ROOT/repo" || exit 2
mkdir -p "$HOST_ROOT/bin"
[ -x "$HOST_ROOT/bin/rlrecipes" ] \
  || { printf '#!/bin/sh\nexec python3 -m rlrecipes "$@"\n' > "$HOST_ROOT/bin/rlrecipes" && chmod +x "$HOST_ROOT/bin/rlrecipes"; }
export PATH="$HOST_ROOT/bin:$PATH" PYTHONPATH="$HOST_ROOT/site:$HOST_ROOT/repo" PYTHONUNBUFFERED=1 \
  RAY_DEDUP_LOGS=0 WANDB_MODE=offline HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
  VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 TOKENIZERS_PARALLELISM=false RLRECIPES_IN_IMAGE=1
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true  # as many open files as the host allows (Ray opens many)
O="$HOST_ROOT/w/out"; mkdir -p "$O" "${W:?set W before sourcing}"
export MODELS_DIR="$W/models" DATA_DIR="$W/data" CKPT_DIR="$W/ckpt" LOG_DIR="$W/logs" REPORTS_DIR="$W/reports" \
  CACHE_DIR="$W/cache"
# shellcheck disable=SC2034  # PROFILE: read by the scripts that source this
RECIPE=canary-grpo-lora PROFILE=any-1gpu-hopper
# SEED: empty for the shipped seed in the usual folders; N for `make reproduce SEED=N`, whose run keeps to seed-N/
SEED="${SEED:-}"; SEEDED="${SEED:+seed-$SEED/}"
CK="$CKPT_DIR/$SEEDED$RECIPE"; LG="$LOG_DIR/$SEEDED$RECIPE"
T0=$(date +%s)

stamp() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$O/timeline.txt"; }
last_step() {  # the highest step verl logged (verl 0.9.1 prefixes its lines with `(TaskRunnerV1 pid=..) `)
  local s
  s=$(grep -ahoE '(^|[) ])step:[0-9]+' "$LG"/console-*.log 2>/dev/null | sed 's/.*step://' | sort -n | tail -1)
  echo "${s:-0}"
}
tracker() { cat "$CK/latest_checkpointed_iteration.txt" 2>/dev/null || echo none; }
seed_assets() {  # $1 seed, $2 folder: `rlrecipes canary-assets` as `make reproduce ... SEED=N`'s assets stage runs it
  # (into MODELS_DIR/seed-N, DATA_DIR/seed-N); its log, canary manifest and the sha256 of what it built (relay.sh sums:
  # a relayed run goes on only on the same bytes) kept in $2, its outcome stamped; returns the builder's status
  # (not 0: refused, e.g. a held-out start outside the band)
  local log="$2/assets-seed-$1.log" code
  rlrecipes canary-assets --models-dir "$MODELS_DIR/seed-$1" --data-dir "$DATA_DIR/seed-$1" --seed "$1" \
    > "$log" 2>&1 < /dev/null
  code=$?
  cp "$MODELS_DIR/seed-$1/canary-qwen2/canary-manifest.json" "$2/manifest-seed-$1.json" 2>/dev/null
  SEEDS_DIR="$W" bash "$HOST_ROOT/repo/benchmarks/gpu/relay.sh" sums "$1" > "$2/assets-seed-$1.sha256"
  stamp "seed $1 assets: exit $code; $(grep -aE '^model |refused|outside the start band|[Ee]rror' "$log" | tail -1 \
    | cut -c1-300)"
  return "$code"
}
record_env() {  # the GPU, the stack's versions and the verl edits, on stdout
  nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv
  python3 -c "import sys, torch, vllm, verl, transformers, peft, ray; print(sys.version.split()[0], 'torch', torch.__version__, 'vllm', vllm.__version__, 'verl', verl.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__, 'ray', ray.__version__)"
  python3 scripts/patch_verl.py --image hopper
}

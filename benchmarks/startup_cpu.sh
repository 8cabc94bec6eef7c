#!/usr/bin/env bash
# The CPU side of the canary's start-up (docs/bench/gpu-overhead.md, "The CPU side"), lever by lever, on a host
# without a GPU: the rendered launcher of `canary-grpo-lora` on `any-1gpu-hopper` (stop guard, verl 0.9.1's
# main_ppo, Ray) in verl 0.9.1's environment (.venvs/verl-0.9.1) with vLLM replaced by a stand-in
# (benchmarks/startup_cpu/vllm_standin.py). verl gets as far as it can without a GPU: Ray, its config, the
# TaskRunner, the TransferQueue, the tokenizer and both datasets ("train and validate dataloader initialized"),
# then stops at the resource pool ("Total available GPUs 0 is less than total desired GPUs 1"). Each lever runs
# REPEATS times; `rlrecipes report`'s start-up reader (rlrecipes/verl/startup.py) reads each console log.
#
#   shipped      as rendered
#   nodash       +ray_kwargs.ray_init.include_dashboard=false: no Ray dashboard (its head and module processes)
#   tq1          transfer_queue.backend.SimpleStorage.num_data_storage_units=1 (verl 0.9.1 starts 8, each a Ray
#                actor process of its own, before the datasets)
#   nodash-tq1   both
#
# Every lever sets ray_kwargs.ray_init.num_cpus=16, as a 16-core GPU host has: with 2 CPUs Ray cannot place the
# TaskRunner and the 8 storage actors together and verl waits for ever. Usage (from the repository root):
#   bash benchmarks/startup_cpu.sh [WORK] [REPEATS]      # WORK: default /tmp/startup-cpu; REPEATS: default 2
# Console logs: WORK/logs-<lever>-<n>/canary-grpo-lora/; the table: WORK/startup.txt.
#   LEVERS="shipped tq1"   a subset of the levers (default: all four)
#   VENV=DIR VLLM=real     another environment with a real vLLM in it, used instead of the stand-in: the Hopper
#                          image's own Python set, installed from its lock on a host without a GPU (see
#                          benchmarks/startup_cpu/hopper_env.sh), so vLLM's import is timed as well
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
W=${1:-/tmp/startup-cpu}; REPEATS=${2:-2}
ALL_LEVERS="shipped nodash tq1 nodash-tq1"
VENV=${VENV:-$REPO/.venvs/verl-0.9.1}; VLLM=${VLLM:-standin}; LEVERS=${LEVERS:-$ALL_LEVERS}
[ -x "$VENV/bin/python" ] || { echo "needs $VENV (make $VENV/.stamp)" >&2; exit 2; }
for lever in $LEVERS; do
  case " $ALL_LEVERS " in *" $lever "*) ;; *) echo "unknown lever '$lever' (one of: $ALL_LEVERS)" >&2; exit 2 ;; esac
done
mkdir -p "$W"
case $VLLM in
  standin)
    mkdir -p "$W/standin/vllm" "$W/standin/vllm-0.24.0.dist-info"
    cp "$REPO/benchmarks/startup_cpu/vllm_standin.py" "$W/standin/vllm/__init__.py"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.24.0\n' > "$W/standin/vllm-0.24.0.dist-info/METADATA"
    PYTHONPATH="$REPO:$W/standin" ;;
  real)
    "$VENV/bin/python" -c "import importlib.metadata as m; m.version('vllm')" 2>/dev/null \
      || { echo "VLLM=real: $VENV has no vllm" >&2; exit 2; }
    PYTHONPATH="$REPO" ;;
  *) echo "VLLM must be standin or real, not '$VLLM'" >&2; exit 2 ;;
esac
export PATH="$VENV/bin:$PATH" PYTHONPATH RAY_DEDUP_LOGS=0 WANDB_MODE=offline HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false \
  MODELS_DIR="$W/models" DATA_DIR="$W/data" CKPT_DIR="$W/ckpt" CACHE_DIR="$W/cache"
# The canary's data (4,096 + 512 rows) and tokenizer as `make reproduce` builds them; the warm start stops at the
# first check (start-up reads the weights' shape, not what they learned).
if [ ! -f "$W/models/canary-qwen2/config.json" ]; then
  python3 -m rlrecipes canary-assets --models-dir "$W/models" --data-dir "$W/data" --sft-steps 1 --eval-every 1 \
    --band 0 1 > "$W/assets.log" 2>&1 || { tail -20 "$W/assets.log"; exit 1; }
fi
python3 -m rlrecipes render canary-grpo-lora --profile any-1gpu-hopper --out "$W/run" --force > /dev/null || exit 1
: > "$W/startup.txt"
for n in $(seq "$REPEATS"); do
  for lever in $LEVERS; do
    extra=(ray_kwargs.ray_init.num_cpus=16)
    case $lever in
      nodash) extra+=(+ray_kwargs.ray_init.include_dashboard=false) ;;
      tq1) extra+=(transfer_queue.backend.SimpleStorage.num_data_storage_units=1) ;;
      nodash-tq1) extra+=(+ray_kwargs.ray_init.include_dashboard=false
                          transfer_queue.backend.SimpleStorage.num_data_storage_units=1) ;;
    esac
    ray stop --force > /dev/null 2>&1; sleep 3
    rm -rf "$W/logs-$lever-$n"
    LOG_DIR="$W/logs-$lever-$n" timeout 300 bash "$W/run/train.sh" "${extra[@]}" > "$W/$lever-$n.out" 2>&1
    grep -q "Total available GPUs 0" "$W/$lever-$n.out" || echo "$lever $n: did not reach the resource pool" >&2
    python3 - "$W/logs-$lever-$n" "$lever" "$n" >> "$W/startup.txt" <<'PY'
import sys
from pathlib import Path
from rlrecipes.verl.startup import read_startup
log = next(Path(sys.argv[1]).glob("*/console-*.log"))
s = read_startup(log)
print(f"{sys.argv[2]:11} {sys.argv[3]}  " + "  ".join(f"{p.key} {p.seconds:5.1f}" for p in s.phases)
      + f"  launch to datasets {s.total_s:5.1f} s  ({log.relative_to(Path(sys.argv[1]).parent)})")
PY
  done
done
ray stop --force > /dev/null 2>&1
cat "$W/startup.txt"

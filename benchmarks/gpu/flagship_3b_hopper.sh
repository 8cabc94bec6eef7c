#!/usr/bin/env bash
# The 3B GRPO-LoRA measurement on the H200 host (offline; Hopper stack from the offline bundle in /root/site, the
# machine's torch 2.11.0+cu130), started detached by bundle_install_and_start.sh (JOB=benchmarks/gpu/flagship_3b_hopper.sh):
#   1. the plan's prediction for these settings (rlrecipes plan --json), written before the run;
#   2. verl (with the image's edits, scripts/patch_verl.py --image hopper): qwen2.5-3b-gsm8k-grpo-lora as
#      shipped on profile h200-141gb (its real architecture, random bf16 weights, LoRA r64/a32 all-linear, vLLM
#      rollout with CUDA graphs), 3 steps at BATCH prompts x 5, ignore_eos (every response runs to 1024 tokens);
#      per-phase GPU memory from NVML samples joined with verl's phase timers (benchmarks/gpu/site,
#      gpu_sampler.py, phase_peaks.py);
#      verl's rollout phase split by the agent-loop marks (benchmarks/gpu/agent_marks.py);
#   3. standalone vLLM on the same model, prompts, batch and lengths with verl's engine arguments
#      (max_num_seqs 256, verl's default): the rollout efficiency;
#   4. optionally a second verl launch of VARIANT_STEPS steps with extra overrides, one per line in
#      /root/w/variant.args (put there later by benchmarks/gpu/flagship_3b_variant.sh; a line ENV:KEY=VALUE
#      sets an environment variable instead, e.g. ENV:RLRECIPES_VLLM_SAMPLING={"detokenize":false}), waited
#      for at most VARIANT_WAIT seconds after step 3; /root/w/variant.skip (or nothing arriving) skips it.
#   STANDALONE=1 first times the levers alone, no verl, about 4 minutes (docs/bench/gpu-hopper-3b.md section G):
#      one update micro batch (update_microbatch.py, fused log-probs) at micro 8, 16 and 32 with and without gradient
#      checkpointing, and packed rows of a new length every call under flex_attention and SDPA (rmpad_attention.py
#      --jitter), into out/standalone/;
#   FIRST_ARGS="key=value ..." gives the first launch overrides of its own (a lever), so that an empty variant.args
#   makes the second launch the shipped recipe: the same host's control, run after the lever.
set -uo pipefail
cd /root/repo || exit 2
export PYTHONPATH="/root/repo/benchmarks/gpu/site:/root/site:/root/repo" PYTHONUNBUFFERED=1 RAY_DEDUP_LOGS=0 \
  WANDB_MODE=offline HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 \
  DO_NOT_TRACK=1
R=qwen2.5-3b-gsm8k-grpo-lora; P=h200-141gb; BATCH=${BATCH:-128}; STEPS=${STEPS:-3}
VARIANT_WAIT=${VARIANT_WAIT:-240}; VARIANT_STEPS=${VARIANT_STEPS:-1}; ALONE=${ALONE:-1}  # ALONE=0: no vLLM-alone run
read -r -a FIRST <<< "${FIRST_ARGS:-}"
O=/root/w/out; W=/root/w; mkdir -p "$O"
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$O/timeline.txt"; }
gpu_free() {  # wait until the card is empty again (vLLM's engine core / Ray workers gone), at most 90 s
  for _ in $(seq 90); do
    used=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
    [ "${used:-99999}" -lt 2048 ] && return 0; sleep 1
  done
  pkill -9 -f 'ray::|raylet|gcs_server|vllm|EngineCore' ; sleep 3
}
OVR=(data.train_batch_size="$BATCH" actor_rollout_ref.actor.ppo_mini_batch_size=$(( BATCH / 2 ))
     actor_rollout_ref.rollout.ignore_eos=true)

stamp "versions"
# verl as the image has it: the anchored edits of scripts/patch_verl.py --image hopper (critic attention; the
# rollout asks vLLM for no per-token detokenization). Runs before the third sitting (2026-12-02) had neither edit.
python3 scripts/patch_verl.py --image hopper > "$O/verl-edits.txt" 2>&1 || { cat "$O/verl-edits.txt"; exit 1; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import sys, torch, vllm, verl, transformers, peft, ray; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'vllm', vllm.__version__, 'verl', verl.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__, 'ray', ray.__version__)"
} > "$O/versions.txt" 2>&1
tail -1 "$O/versions.txt"
python3 -m rlrecipes plan "$R" --profile "$P" --json "${OVR[@]}" "${FIRST[@]}" trainer.total_training_steps="$STEPS" > "$O/plan-prediction.json" 2>&1

if [ "${STANDALONE:-0}" = 1 ]; then
  S="$O/standalone"; mkdir -p "$S"
  V=$(python3 -c "import os, verl; print(os.path.dirname(verl.__file__))")
  for m in 8 16 32; do for c in "" --no-checkpointing; do
    name="update-fused-micro$m${c:+-nockpt}"; stamp "standalone $name"
    timeout 120 python3 benchmarks/gpu/update_microbatch.py --arch qwen2.5-3b --micro "$m" $c \
      --verl-source "$V/utils/torch_functional.py" --fused-source "$V/utils/experimental/torch_functional.py" \
      --out "$S/$name.json" > "$S/$name.log" 2>&1
  done; done
  for a in flex_attention sdpa; do
    stamp "standalone rmpad-$a"
    timeout 150 python3 benchmarks/gpu/rmpad_attention.py --arch qwen2.5-3b --micro 32 --attn "$a" --reps 5 \
      --jitter 256 --out "$S/rmpad-$a-micro32-jitter256.json" > "$S/rmpad-$a.log" 2>&1
  done
  stamp "standalone done"
fi

python3 benchmarks/gpu/gpu_sampler.py "$O/gpu-samples.jsonl" --interval 0.25 &
SAMPLER=$!
stamp "start verl $R on $P, batch $BATCH ${FIRST[*]}"
# fit_run NAME DIR WORK STEPS LIMIT INNER [overrides...]: one verl launch through fit.py (killed after LIMIT s,
# fit.py's own timeout INNER), its marks and metrics in DIR, then the card emptied and verl's rollout phase split
fit_run() {
  local name=$1 out=$2 work=$3 steps=$4 limit=$5 inner=$6; shift 6
  RLRECIPES_PHASE_MARKS="$out/phase-marks.jsonl" RLRECIPES_AGENT_MARKS="$out/agent-marks.jsonl" \
    VERL_FILE_LOGGER_PATH="$out/metrics.jsonl" \
    timeout "$limit" python3 benchmarks/gpu/memory_fit.py "$R" --arch qwen2.5-3b --assets "$W/assets" --work "$work" \
    --steps "$steps" --profile "$P" --weights-dtype bfloat16 --timeout "$inner" "${OVR[@]}" "$@" \
    > "$out/verl-fit.log" 2>&1
  local rc=$?
  stamp "end $name: exit $rc"
  cp "$work/fit-$R.json" "$out/" 2>/dev/null
  ray stop --force > /dev/null 2>&1; gpu_free
  python3 benchmarks/gpu/agent_marks.py "$out/agent-marks.jsonl" "$out/phase-marks.jsonl" \
    --samples "$O/gpu-samples.jsonl" --out "$out/gen-split.json" > /dev/null 2>&1
  return "$rc"
}
fit_run verl "$O" "$W/fit" "$STEPS" 1260 1200 "${FIRST[@]}"
python3 benchmarks/gpu/phase_peaks.py "$O/phase-marks.jsonl" "$O/gpu-samples.jsonl" --out "$O/phase-peaks.json" \
  > "$O/phase-peaks.txt" 2>&1

DATA="$W/assets/data/smoke-gsm8k/train.parquet"; MODEL="$W/assets/models/random-qwen2.5-3b"
if [ "$ALONE" = 1 ]; then
  stamp "start vllm alone, max_num_seqs 256"
  timeout 300 python3 benchmarks/gpu/vllm_alone.py --model "$MODEL" --data "$DATA" --prompts "$BATCH" --n 5 \
    --max-tokens 1024 --lora-rank 64 --lora-alpha 32 --gpu-memory-utilization 0.6 --max-num-seqs 256 \
    --adapter "$W/adapter" --out "$O/vllm-alone-256.json" > "$O/vllm-alone-256.log" 2>&1
  stamp "end vllm alone 256: exit $?"
  gpu_free
fi
stamp "waiting up to ${VARIANT_WAIT}s for /root/w/variant.args"
for _ in $(seq "$VARIANT_WAIT"); do [ -f "$W/variant.args" ] || [ -f "$W/variant.skip" ] && break; sleep 1; done
if [ -f "$W/variant.args" ] && [ ! -f "$W/variant.skip" ]; then
  mapfile -t LINES < "$W/variant.args"; V="$O/variant"; mkdir -p "$V"; cp "$W/variant.args" "$V/"
  VAR=(); VENV=()  # "ENV:KEY=VALUE" lines set the variant's environment, the others are Hydra overrides
  for line in "${LINES[@]}"; do case "$line" in ENV:*) VENV+=("${line#ENV:}") ;; ?*) VAR+=("$line") ;; esac; done
  stamp "start verl variant ($VARIANT_STEPS step(s)): ${VENV[*]} ${VAR[*]}"
  LIMIT=${VARIANT_TIMEOUT:-720}
  ( for kv in "${VENV[@]}"; do export "${kv?}"; done
    fit_run "verl variant" "$V" "$W/fit-variant" "$VARIANT_STEPS" "$LIMIT" $(( LIMIT - 30 )) "${VAR[@]}" )
fi
kill "$SAMPLER" 2>/dev/null
touch "$O/DONE"

#!/usr/bin/env bash
# RunPod start hook of the A100 image (deploy/runpod/template.json: dockerArgs).
#
# 1. Keeps RunPod's own behaviour: runs /start.sh (SSH with PUBLIC_KEY, Jupyter with JUPYTER_PASSWORD) in the
#    background when the image has it and it is not running yet (the image entry point may have started it).
# 2. With AUTO_TRAIN=1 runs the recipe's pipeline  data -> model -> preflight -> train -> merge -> eval -> report
#    with everything under /workspace (the pod's volume), so a stopped pod picks up where it was when started
#    again: a stage whose output exists is skipped, and train resumes from verl's last checkpoint
#    (resume_mode=auto, after `rlrecipes resume-check` repairs the tracker).
# 3. Stays up afterwards (also after a failure), so SSH and Jupyter keep working; RUNPOD_HOOK_STAY=0 returns
#    the pipeline's exit code instead.
#
# The train stage runs the checkpoint watchdog beside the trainer (compose.yaml runs it as a sidecar; a pod
# has one container): it keeps the last WATCHDOG_KEEP_LAST checkpoints and the disk floor, and follows the
# run's logs. When it reports the run stalled, the launcher's stop guard (RLRECIPES_STALL_STATUS) stops verl
# with exit 75 and the stage engine's `resume` (rlrecipes stage resume, the same as the image's `run` and
# `resume` stages) relaunches it at most STALL_RESTARTS times; any other exit status ends the stage.
#
# Environment: RECIPE (required with AUTO_TRAIN=1), PROFILE (empty: the recipe's own), AUTO_TRAIN (0|1),
# WANDB_API_KEY / HF_TOKEN (RunPod secrets), WORKSPACE (default /workspace), FORCE_STAGES (e.g. "eval report":
# rerun those even if their output exists), STALL_RESTARTS (3), WATCHDOG (1; 0: none), WATCHDOG_KEEP_LAST (2),
# WATCHDOG_INTERVAL (30 s), WATCHDOG_ARGS (more `rlrecipes watchdog` flags, e.g. "--stall-after 1800").
# Outputs: $WORKSPACE/{data,models,checkpoints,logs,hf-cache,cache,eval,reports}; this hook logs to
# $WORKSPACE/logs/runpod-start.log, the watchdog to $WORKSPACE/logs/watchdog.log.
# train() and its helpers run through stage's "$@", which shellcheck cannot follow.
# shellcheck disable=SC2329
set -euo pipefail

: "${WORKSPACE:=/workspace}"
: "${RLRECIPES_HOME:=/opt/rlrecipes}"
: "${RLRECIPES_PYTHON:=python3}"
: "${RUNPOD_START_SH:=/start.sh}"
: "${RUNPOD_HOOK_STAY:=1}"
: "${RECIPE:=}"
: "${PROFILE:=}"
: "${AUTO_TRAIN:=0}"
: "${FORCE_STAGES:=}"
: "${STALL_RESTARTS:=3}"
: "${WATCHDOG:=1}"
: "${WATCHDOG_KEEP_LAST:=2}"
: "${WATCHDOG_INTERVAL:=30}"
: "${WATCHDOG_ARGS:=}"

# Everything a run reads or writes on the volume: the container disk is lost when the pod stops.
MODELS_DIR="$WORKSPACE/models"
DATA_DIR="$WORKSPACE/data"
CKPT_DIR="$WORKSPACE/checkpoints"
LOG_DIR="$WORKSPACE/logs"
HF_HOME="$WORKSPACE/hf-cache"
CACHE_DIR="$WORKSPACE/cache"   # compile caches (vLLM, inductor, Triton): the stage engine points them here
EVAL_DIR="$WORKSPACE/eval"
REPORTS_DIR="$WORKSPACE/reports"
export WORKSPACE RLRECIPES_HOME MODELS_DIR DATA_DIR CKPT_DIR LOG_DIR HF_HOME CACHE_DIR STALL_RESTARTS

mkdir -p "$LOG_DIR"
HOOK_LOG="$LOG_DIR/runpod-start.log"
exec > >(tee -a "$HOOK_LOG") 2> >(tee -a "$HOOK_LOG" >&2)

log() { printf '[runpod-start %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

finish() {
    local code=$1
    if [ "$RUNPOD_HOOK_STAY" = 1 ]; then
        log "pipeline exit code $code; staying up for SSH/Jupyter (logs: $HOOK_LOG)"
        exec sleep infinity
    fi
    exit "$code"
}

start_runpod_services() {
    if [ ! -x "$RUNPOD_START_SH" ]; then
        log "no $RUNPOD_START_SH in this image: SSH/Jupyter come only from the image itself"
        return 0
    fi
    # The image entry point starts /start.sh on RunPod too; a second copy would fight over sshd's port.
    if pgrep -f "(^|[[:space:]])${RUNPOD_START_SH}([[:space:]]|\$)" >/dev/null 2>&1; then
        log "$RUNPOD_START_SH is already running"
        return 0
    fi
    # An unresolved reference would be Jupyter's password, and it is public (it is in the template).
    case "${JUPYTER_PASSWORD:-}" in
        *RUNPOD_SECRET_*) log "warning: JUPYTER_PASSWORD is an unresolved RunPod secret reference: no Jupyter"
                          unset JUPYTER_PASSWORD ;;
    esac
    log "starting $RUNPOD_START_SH in the background (SSH, Jupyter)"
    "$RUNPOD_START_SH" >>"$LOG_DIR/runpod-services.log" 2>&1 </dev/null &
}

# Unset secrets RunPod left as literal references (no such secret defined), so they read as "not set".
drop_unresolved_secrets() {
    local key
    for key in WANDB_API_KEY HF_TOKEN; do
        case "${!key:-}" in
            *RUNPOD_SECRET_*) log "warning: $key is an unresolved RunPod secret reference; treating it as unset"
                              unset "$key" ;;
        esac
    done
}

STOPPING=0
TRAIN_PID=
TOTAL_STEPS=
forced() { case " $FORCE_STAGES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# dataset name, dataset dir, template, model dir, total training steps -- from the recipe engine.
recipe_fields() {
    "$RLRECIPES_PYTHON" -c 'import sys
from rlrecipes.plan.plan import build_plan
from rlrecipes.recipe.load import resolve
run = resolve(sys.argv[1], profile=sys.argv[2] or None, overrides=[])
d = run.recipe.dataset
print(d.name, d.dir_name, d.template, run.recipe.model.dir_name, build_plan(run).schedule.total_steps)' \
        "$RECIPE" "$PROFILE"
}


stage() {
    local name=$1 done_file=$2
    shift 2
    if [ -e "$done_file" ] && ! forced "$name"; then
        log "$name: already done ($done_file); skipping"
        return 0
    fi
    log "$name: $*"
    local code=0
    "$@" || code=$?
    if [ "$code" -ne 0 ]; then
        log "$name failed with exit code $code"
        finish "$code"
    fi
}

WATCHDOG_PID=
start_watchdog() {
    if [ "$WATCHDOG" = 0 ]; then
        log "WATCHDOG=0: no watchdog; checkpoints are not pruned and a stalled run is not restarted"
        return 0
    fi
    local -a total=() extra=()
    if [[ "$TOTAL_STEPS" =~ ^[0-9]+$ ]]; then total=(--total-steps "$TOTAL_STEPS"); fi  # finished is not stalled
    read -r -a extra <<<"$WATCHDOG_ARGS"
    mkdir -p "$CKPT_DIR" "$LOG_DIR/$RECIPE" || return
    rlrecipes watchdog --root "$CKPT_DIR" --keep-last "$WATCHDOG_KEEP_LAST" --interval "$WATCHDOG_INTERVAL" \
        --progress "$LOG_DIR/$RECIPE" ${total[@]+"${total[@]}"} ${extra[@]+"${extra[@]}"} \
        >>"$LOG_DIR/watchdog.log" 2>&1 </dev/null &
    WATCHDOG_PID=$!
    export RLRECIPES_STALL_STATUS="$CKPT_DIR/.watchdog/status.json"
    log "watchdog (pid $WATCHDOG_PID) guards $CKPT_DIR, follows $LOG_DIR/$RECIPE (log: $LOG_DIR/watchdog.log)"
}

stop_watchdog() {
    [ -n "$WATCHDOG_PID" ] || return 0
    kill -TERM "$WATCHDOG_PID" 2>/dev/null || true
    wait "$WATCHDOG_PID" 2>/dev/null || true
    WATCHDOG_PID=
}

# One launch: preflight, resume-check, the launcher; returns the launcher's exit status.
# The stage engine's `resume` (rlrecipes/launch/stages.py): resume-check, preflight, the launcher (the run directory
# of another profile reused across pod restarts), a relaunch after a stall (exit 75) at most STALL_RESTARTS times.
# The pod's SIGTERM is passed on to it once; it stops the trainer the way the images' entry point does.
train() {
    start_watchdog || return
    local code=0
    rlrecipes stage --recipe "$RECIPE" --profile "$PROFILE" resume &
    TRAIN_PID=$!
    trap 'STOPPING=1; kill -TERM "$TRAIN_PID" 2>/dev/null' TERM INT
    while :; do
        code=0
        wait "$TRAIN_PID" || code=$?
        kill -0 "$TRAIN_PID" 2>/dev/null || break
    done
    trap - TERM INT
    stop_watchdog
    if [ "$STOPPING" = 1 ]; then
        log "stopped (signal) with exit code $code; the next start resumes from the last whole checkpoint"
        exit "$code"
    fi
    [ "$code" -eq 0 ] || return "$code"
    mkdir -p "$LOG_DIR/$RECIPE" || return
    printf 'finished %s (tracker: %s)\n' "$(date -u +%FT%TZ)" \
        "$(cat "$CKPT_DIR/$RECIPE/latest_checkpointed_iteration.txt" 2>/dev/null || echo none)" \
        >"$LOG_DIR/$RECIPE/train.done"
}

main() {
    start_runpod_services
    case "$AUTO_TRAIN" in
        0) log "AUTO_TRAIN=0: not training (set AUTO_TRAIN=1 in the template to run $RECIPE)"; finish 0 ;;
        1) ;;
        *) log "error: AUTO_TRAIN must be 0 or 1, got '$AUTO_TRAIN'"; finish 2 ;;
    esac
    if [ -z "$RECIPE" ]; then
        log "error: set RECIPE in the template's environment (e.g. qwen2.5-3b-gsm8k-grpo-lora)"
        finish 2
    fi
    drop_unresolved_secrets

    local fields dataset dataset_dir template model_dir
    fields=$(recipe_fields) || { log "error: cannot resolve recipe '$RECIPE' (profile '${PROFILE:-its own}')"; finish 2; }
    read -r dataset dataset_dir template model_dir TOTAL_STEPS <<<"$fields"
    log "recipe $RECIPE${PROFILE:+ on $PROFILE}: $TOTAL_STEPS steps; everything under $WORKSPACE"

    local merged="$MODELS_DIR/merged/$RECIPE" evals="$EVAL_DIR/$RECIPE" report="$REPORTS_DIR/$RECIPE"
    stage data "$DATA_DIR/$dataset_dir/manifest.json" \
        rlrecipes data "$dataset" --out "$DATA_DIR/$dataset_dir" --template "$template"
    stage model "$MODELS_DIR/$model_dir/config.json" \
        rlrecipes model "$RECIPE" --models-dir "$MODELS_DIR"
    stage train "$LOG_DIR/$RECIPE/train.done" train
    stage merge "$merged/merge-info.json" \
        rlrecipes merge "$CKPT_DIR/$RECIPE" --recipe "$RECIPE" --out "$merged" --log-dir "$LOG_DIR/$RECIPE" --force
    stage eval "$evals/eval-summary.json" \
        rlrecipes eval "$merged" --out "$evals"
    stage report "$report/report.md" \
        rlrecipes report "$LOG_DIR/$RECIPE" --eval "$evals" --out "$report"
    log "done: report at $report/report.md, merged model at $merged"
    finish 0
}

main "$@"

#!/usr/bin/env bash
# Entry point of the rlrecipes images: print the environment block, then run one stage.
#
#   entrypoint.sh STAGE [ARGS...]
#
# Stages (RECIPE and PROFILE come from the environment; PROFILE empty = the recipe's own profile), in the
# order `run` chains them:
#   run        data (if missing) -> model (unless complete) -> resume-check -> train  [compose default];
#              relaunched (resume-check -> train) when the stop guard stopped a stalled run (exit 75, below)
#   data       prepare the recipe's dataset as verl parquet under $DATA_DIR/<dataset dir> (skipped if present)
#   model      download the recipe's base model into $MODELS_DIR
#   resume     resume-check (repair the checkpoint tracker), then train; relaunched like `run` on exit 75
#   train      preflight (writes the launch environment), the Ray cluster check when RAY_ADDRESS is set, then
#              the recipe's launcher (extra ARGS are Hydra overrides); verl resumes by itself
#   preflight  check GPUs, memory, disk, shm, model and data
#   eval       `rlrecipes eval ARGS`, its fast in-repo check on the recipe's own validation file
#   reproduce  `rlrecipes reproduce`: assets or data, model -> resume -> merge -> eval -> report -> expect, each
#              through this script again, resumable (rlrecipes/launch/reproduce.py)
#   shell      an interactive shell (or, on RunPod, keep the pod alive for SSH/Jupyter)
#   any other rlrecipes command (merge, report, smoke, watchdog, env, ... see `rlrecipes --help`) runs with ARGS;
#   anything else is run as a command, e.g. `entrypoint.sh python3 -c 'import verl'`.
#
# On RunPod (RUNPOD_POD_ID set and /start.sh present) RunPod's own /start.sh runs in the background first, so
# its SSH and Jupyter keep working whatever stage runs.
set -euo pipefail

# The repository this script belongs to (/opt/rlrecipes in the images, the checkout elsewhere).
: "${RLRECIPES_HOME:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
: "${RECIPE:=}"
: "${PROFILE:=}"
: "${DATA_DIR:=/workspace/data}"
: "${MODELS_DIR:=/workspace/models}"
: "${CKPT_DIR:=/workspace/checkpoints}"
: "${LOG_DIR:=/workspace/logs}"
export RLRECIPES_HOME DATA_DIR MODELS_DIR CKPT_DIR LOG_DIR

# Exit 75 (EX_TEMPFAIL) is the stop guard's (rlrecipes/verl/stopguard.py) and means one thing: the watchdog
# reported the run stalled and the guard stopped it. `run` and `resume` relaunch on it, and on nothing else,
# at most STALL_RESTARTS times, with resume-check before each relaunch. This lives here, not in a restart
# policy: Compose's `restart:` cannot filter exit codes (`on-failure:N` would also repeat a config error or a
# failed preflight), a RunPod pod and a Slurm job have no such policy at all, and the image is what all three run.
EXIT_STALLED=75
: "${STALL_RESTARTS:=3}"

log() { printf '[entrypoint] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 2; }

need_recipe() {
    [ -n "$RECIPE" ] || die "set RECIPE (e.g. RECIPE=qwen2.5-0.5b-gsm8k-ppo); list them with: rlrecipes recipes"
}

profile_args() {
    if [ -n "$PROFILE" ]; then printf '%s\n' --profile "$PROFILE"; fi
}

# A field of the resolved recipe, through the recipe engine (so the shell never parses YAML).
recipe_field() {
    python3 -c 'import sys
from rlrecipes.errors import RecipeError
from rlrecipes.recipe.load import resolve
try:
    value = resolve(sys.argv[1], profile=sys.argv[2] or None, overrides=[])
except RecipeError as exc:
    sys.exit(f"error: {exc}")
for part in sys.argv[3].split("."):
    value = getattr(value, part)
print(value)' "$RECIPE" "$PROFILE" "$1"
}

# The value the launch gives a verl key (e.g. data.val_files), through the recipe engine.
recipe_value() {
    python3 -c 'import sys
from rlrecipes.errors import RecipeError
from rlrecipes.recipe.load import resolve
try:
    print(resolve(sys.argv[1], profile=sys.argv[2] or None, overrides=[]).get(sys.argv[3]))
except RecipeError as exc:
    sys.exit(f"error: {exc}")' "$RECIPE" "$PROFILE" "$1"
}

# Whether $1 is a subcommand of the rlrecipes CLI (its own table decides, not a list kept here).
is_rlrecipes_command() {
    python3 -c 'import sys
from rlrecipes.cli import COMMANDS
sys.exit(0 if sys.argv[1] in COMMANDS else 1)' "$1"
}

start_runpod_services() {
    # Once a container: `rlrecipes reproduce` runs each of its stages through this script again.
    if [ -n "${RUNPOD_POD_ID:-}" ] && [ -x /start.sh ] && [ -z "${RLRECIPES_RUNPOD_STARTED:-}" ]; then
        export RLRECIPES_RUNPOD_STARTED=1
        # No such secret on the account leaves the template's reference as the value: /start.sh would serve
        # Jupyter with it as the password, and it is public (it is in the template).
        case "${JUPYTER_PASSWORD:-}" in
            *RUNPOD_SECRET_*) log "warning: JUPYTER_PASSWORD is an unresolved RunPod secret reference: no Jupyter" \
                                  "(create the JUPYTER_PASSWORD secret)"
                              unset JUPYTER_PASSWORD ;;
        esac
        log "RunPod pod ${RUNPOD_POD_ID}: starting /start.sh in the background (SSH, Jupyter)"
        /start.sh >/var/log/runpod-start.log 2>&1 &
    fi
}

print_env() {
    rlrecipes env || log "warning: 'rlrecipes env' failed (exit $?); continuing"
}

stage_data() {
    need_recipe
    local out
    out="$DATA_DIR/$(recipe_field recipe.dataset.dir_name)"
    if [ -f "$out/manifest.json" ] && [ "${FORCE_DATA:-0}" != 1 ]; then
        log "data: $out/manifest.json exists; skipping (FORCE_DATA=1 rebuilds)"
        return 0
    fi
    rlrecipes data "$(recipe_field recipe.dataset.name)" --out "$out" --template "$(recipe_field recipe.dataset.template)" \
        "$@"
}

stage_model() {
    need_recipe
    rlrecipes model "$RECIPE" --models-dir "$MODELS_DIR" "$@"
}

stage_preflight() {
    need_recipe
    local -a prof
    mapfile -t prof < <(profile_args)
    rlrecipes preflight "$RECIPE" "${prof[@]}" "$@"
}

stage_eval() {
    local -a fast=()
    if [ -n "$RECIPE" ]; then
        fast=(--fast-data "$(recipe_value data.val_files)")  # ARGS may name another file: the last one wins
    fi
    exec rlrecipes eval ${fast[@]+"${fast[@]}"} "$@"
}

stage_resume_check() {
    need_recipe
    local run_dir="$CKPT_DIR/$RECIPE"
    if [ -d "$run_dir" ]; then
        rlrecipes resume-check --root "$run_dir"
    else
        log "resume-check: no checkpoints at $run_dir yet; training starts at step 0"
    fi
}

stage_train() {
    need_recipe
    # Preflight sees the same overrides as the launch; it writes the environment the launch needs
    # (e.g. WANDB_MODE=offline when wandb has no credentials) instead of letting verl crash later.
    local env_file="$LOG_DIR/$RECIPE/launch.env"
    mkdir -p "$LOG_DIR/$RECIPE"
    stage_preflight --env-file "$env_file" "$@"
    if [ -f "$env_file" ]; then
        set -a
        # shellcheck disable=SC1090  # the env file is the one preflight just wrote, named at run time
        . "$env_file"
        set +a
    fi
    if [ -n "${RAY_ADDRESS:-}" ]; then
        # An existing Ray cluster: check it has nnodes x GPUs before verl's ray.init joins it.
        local -a prof
        mapfile -t prof < <(profile_args)
        rlrecipes cluster "$RECIPE" "${prof[@]}" --wait "${CLUSTER_WAIT:-0}" "$@"
    fi
    local launcher="$RLRECIPES_HOME/recipes/$RECIPE.sh"
    if [ -n "$PROFILE" ]; then
        # Another profile than the recipe's own: render a run directory with its launcher.
        local out
        out="$LOG_DIR/$RECIPE/run-$PROFILE"
        rlrecipes render "$RECIPE" --profile "$PROFILE" --out "$out"
        launcher="$out/train.sh"
    fi
    [ -f "$launcher" ] || die "no launcher at $launcher; regenerate with: rlrecipes launchers"
    log "train: bash $launcher $*"
    exec bash "$launcher" "$@"
}

# Run "$@" in the background and wait for it, passing TERM/INT/HUP on (tini signals this shell, not the
# trainer), so `docker stop` still reaches the stop guard. Sets STOPPING when a signal came.
STOPPING=0
supervise() {
    local pid code
    ( set -e; "$@" ) &
    pid=$!
    trap 'STOPPING=1; kill -TERM "$pid" 2>/dev/null || true' TERM
    trap 'STOPPING=1; kill -INT "$pid" 2>/dev/null || true' INT
    trap 'STOPPING=1; kill -HUP "$pid" 2>/dev/null || true' HUP
    while :; do
        code=0
        wait "$pid" || code=$?
        kill -0 "$pid" 2>/dev/null || break   # still running: a trapped signal interrupted `wait`
    done
    trap - TERM INT HUP
    return "$code"
}

# resume-check then train; again after exit 75 (a stalled run stopped by its guard), at most STALL_RESTARTS times.
train_with_restarts() {
    local restarts=0 code
    [[ "$STALL_RESTARTS" =~ ^[0-9]+$ ]] || die "STALL_RESTARTS must be a whole number, not '$STALL_RESTARTS'"
    while :; do
        stage_resume_check || return $?
        supervise stage_train "$@"   # not in an || list: that would turn off set -e inside it
        code=$?
        if [ "$code" -ne "$EXIT_STALLED" ] || [ "$STOPPING" = 1 ]; then
            return "$code"
        fi
        if [ "$restarts" -ge "$STALL_RESTARTS" ]; then
            log "error: the run stalled again after $restarts relaunch(es) (STALL_RESTARTS=$STALL_RESTARTS); giving up"
            return "$code"
        fi
        restarts=$((restarts + 1))
        log "the run stalled and was stopped (exit $EXIT_STALLED); relaunch $restarts of $STALL_RESTARTS from the last whole checkpoint"
    done
}

main() {
    local stage=${1:-shell}
    [ "$#" -gt 0 ] && shift
    start_runpod_services
    case "$stage" in
        shell)
            print_env
            if [ -n "${RUNPOD_POD_ID:-}" ] && [ ! -t 0 ]; then
                log "RunPod without a terminal: staying up for SSH/Jupyter"
                exec sleep infinity
            fi
            exec bash "$@" ;;
        run)
            print_env
            stage_data
            # `rlrecipes model` decides: a no-op when its completion marker is there, a resumed download when
            # an earlier one was interrupted (config.json alone made a half-downloaded model look complete).
            stage_model
            set +e; train_with_restarts "$@"; exit $? ;;
        data) print_env; stage_data "$@" ;;
        model) stage_model "$@" ;;
        preflight) print_env; stage_preflight "$@" ;;
        train) print_env; stage_train "$@" ;;
        resume) print_env; set +e; train_with_restarts "$@"; exit $? ;;
        eval) stage_eval "$@" ;;
        *)
            if is_rlrecipes_command "$stage"; then
                exec rlrecipes "$stage" "$@"
            fi
            exec "$stage" "$@" ;;
    esac
}

main "$@"

#!/usr/bin/env bash
# Entry point of the rlrecipes images: print the environment block, then run one stage.
#
#   entrypoint.sh STAGE [ARGS...]
#
# The stages run, data, model, preflight, train, resume and eval are the stage engine's,
# in Python: `rlrecipes stage STAGE -- ARGS` (rlrecipes/launch/stages.py says what each does and how running it
# again goes on where it stopped). RECIPE and PROFILE come from the environment (PROFILE empty = the recipe's
# own profile). compose.yaml's services run `run`; `make train` runs `run`, `make resume` runs `resume`.
#   reproduce  `rlrecipes reproduce`: every stage from nothing to a verdict, resumable (rlrecipes/launch/reproduce.py)
#   shell      an interactive shell (or, on RunPod, keep the pod alive for SSH/Jupyter)
#   any other rlrecipes command (merge, report, smoke, watchdog, env, ... see `rlrecipes --help`) runs with ARGS;
#   anything else is run as a command, e.g. `entrypoint.sh python3 -c 'import verl'`.
#
# Only what must be shell stays here: RunPod's own /start.sh is started in the background first (RUNPOD_POD_ID
# set and /start.sh present), so its SSH and Jupyter keep working whatever stage runs. Every stage is exec'd, so
# the process that `docker stop` (through tini) signals is the stage engine itself.
set -euo pipefail

# The repository this script belongs to (/opt/rlrecipes in the images, the checkout elsewhere).
: "${RLRECIPES_HOME:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
: "${DATA_DIR:=/workspace/data}"
: "${MODELS_DIR:=/workspace/models}"
: "${CKPT_DIR:=/workspace/checkpoints}"
: "${LOG_DIR:=/workspace/logs}"
: "${CACHE_DIR:=/workspace/cache}"   # compile caches; the stage engine points vLLM, inductor and Triton here
export RLRECIPES_HOME DATA_DIR MODELS_DIR CKPT_DIR LOG_DIR CACHE_DIR

log() { printf '[entrypoint] %s\n' "$*" >&2; }

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
        run | data | preflight | train | resume)
            print_env
            exec rlrecipes stage "$stage" -- "$@" ;;
        model | eval)
            exec rlrecipes stage "$stage" -- "$@" ;;
        *)
            if is_rlrecipes_command "$stage"; then
                exec rlrecipes "$stage" "$@"
            fi
            exec "$stage" "$@" ;;
    esac
}

main "$@"

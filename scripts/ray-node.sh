#!/usr/bin/env bash
# Start one Ray node inside an rlrecipes image: the head of a cluster, or a worker that joins one.
#
#   ray-node.sh head   [RAY START ARGS...]            # GCS on $RAYNODE_PORT (default 6379)
#   ray-node.sh worker HOST:PORT [RAY START ARGS...]   # join the head at HOST:PORT
#
# Then, on the head's host: RAY_ADDRESS=<head ip>:6379 make train RECIPE=... PROFILE=a100-80gb-2node
# (verl's main_ppo calls ray.init(), which joins the cluster named by RAY_ADDRESS).
#
# Settings (environment; RAYNODE_ rather than RAY_ because Ray itself reads many RAY_* variables):
#   RAYNODE_NUM_GPUS            GPUs this node offers (default: the entries of CUDA_VISIBLE_DEVICES when it is
#                               set, else the count `nvidia-smi -L` lists)
#   RAYNODE_NUM_CPUS            CPUs this node offers (default: Ray counts them; on Slurm use the allocation)
#   RAYNODE_OBJECT_STORE_BYTES  object store size (default: half of /dev/shm, at most 30% of RAM -- the
#                               container's cgroup memory limit where one is set -- as Ray's own default;
#                               Ray falls back to a slow /tmp store when /dev/shm is too small)
#   RAYNODE_NODE_IP             address other nodes reach this one at (multi-NIC hosts, Slurm)
#   RAYNODE_PORT                head GCS port (default 6379)
#   RAYNODE_BLOCK               1 (default): stay in the foreground like a container's main process; 0: return
#   RAYNODE_EXTRA_ARGS          more `ray start` arguments (word-split; how `make ray-head ARGS=...` reaches
#                               the container)
# Anything after the role (and the head address) goes to `ray start` as is, e.g. fixed ports for a firewall:
#   --node-manager-port=6380 --object-manager-port=6381 --min-worker-port=10002 --max-worker-port=10999
#
# Where it runs: inside an rlrecipes image (RLRECIPES_IN_IMAGE=1), or on a host that has `ray` (bare metal,
# Slurm), it starts the node here. On a host without Ray (`make ray-head` / `make ray-worker HEAD=...`), it
# starts the node in the A100 image instead: the ray-head / ray-worker service of compose.multinode.yaml
# (host network, GPUs, shared /workspace from SHARED_WORKSPACE), detached.
set -euo pipefail

log() { printf '[ray-node] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 2; }

usage() {
    sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# Docker's default /dev/shm is 64 MiB; Ray then spills its object store to /tmp and NCCL can crash.
MIN_SHM_BYTES=$((512 * 1024 * 1024))
# Ray refuses an object store below 75 MiB.
MIN_STORE_BYTES=$((75 * 1024 * 1024))

gpu_count() {
    if [ -n "${RAYNODE_NUM_GPUS:-}" ]; then
        printf '%s\n' "$RAYNODE_NUM_GPUS"
    elif [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
        # nvidia-smi lists every GPU of the host; CUDA_VISIBLE_DEVICES (Slurm, a shared host) is what
        # this node may use, and what Ray's workers will see.
        case "$CUDA_VISIBLE_DEVICES" in
            "" | NoDevFiles | -1) printf '0\n' ;;
            *) printf '%s\n' "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c . ;;
        esac
    elif command -v nvidia-smi >/dev/null 2>&1; then
        local listed
        listed=$(nvidia-smi -L) || die "nvidia-smi -L failed; is the GPU visible in this container (--gpus all)?"
        printf '%s\n' "$listed" | grep -c '^GPU ' || true
    else
        die "no nvidia-smi here: set RAYNODE_NUM_GPUS (0 for a CPU-only node)"
    fi
}

# The container's memory limit in bytes, empty when none: cgroup v1 first, then v2 ("max" = none), as Ray
# reads it (ray._common.utils.get_system_memory). /proc/meminfo shows the whole host inside a container.
cgroup_memory_limit() {
    local root=${RAYNODE_CGROUP_ROOT:-/sys/fs/cgroup} file value
    for file in "$root/memory/memory.limit_in_bytes" "$root/memory.max"; do
        [ -r "$file" ] || continue
        read -r value < "$file" || true
        case "$value" in
            '' | *[!0-9]*) ;;
            *) printf '%s\n' "$value" ;;
        esac
        return
    done
}

object_store_bytes() {
    if [ -n "${RAYNODE_OBJECT_STORE_BYTES:-}" ]; then
        printf '%s\n' "$RAYNODE_OBJECT_STORE_BYTES"
        return
    fi
    local shm ram limit half cap
    shm=$(df -B1 --output=size /dev/shm 2>/dev/null | tail -n 1 | tr -d ' ') || shm=0
    [ -n "$shm" ] || shm=0
    if [ "$shm" -lt "$MIN_SHM_BYTES" ]; then
        die "/dev/shm is $((shm / 1024 / 1024)) MiB: start the container with --shm-size=16g (compose: shm_size) or" \
            "--ipc=host, or set RAYNODE_OBJECT_STORE_BYTES"
    fi
    ram=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) * 1024))  # in bash: awk prints 2.5e+10
    limit=$(cgroup_memory_limit)
    if [ -n "$limit" ] && [ "$limit" -lt "$ram" ]; then ram=$limit; fi
    half=$((shm / 2))
    cap=$((ram * 3 / 10))
    if [ "$half" -gt "$cap" ]; then half=$cap; fi
    if [ "$half" -lt "$MIN_STORE_BYTES" ]; then half=$MIN_STORE_BYTES; fi
    printf '%s\n' "$half"
}

in_compose() {
    local role=$1 repo
    shift
    repo=$(cd "$(dirname "$0")/.." && pwd)
    command -v docker >/dev/null || die "neither ray nor docker found; run this inside the image or install Docker"
    local -a env=(RAYNODE_EXTRA_ARGS="${RAYNODE_EXTRA_ARGS:-} $*" RAY_PORT="${RAYNODE_PORT:-6379}")
    if [ "$role" = worker ]; then env+=(RAY_HEAD="$HEAD_ADDRESS"); fi
    log "no ray here: starting ray-$role from compose.multinode.yaml (docker compose logs -f ray-$role)"
    exec env "${env[@]}" docker compose -f "$repo/compose.yaml" -f "$repo/compose.multinode.yaml" \
        --profile "ray-$role" up -d "ray-$role"
}

main() {
    [ "$#" -ge 1 ] || usage
    local role=$1
    shift
    local -a args
    case "$role" in
        head)
            args=(--head "--port=${RAYNODE_PORT:-6379}" --include-dashboard=false) ;;
        worker)
            if [ "$#" -lt 1 ] || [ -z "$1" ]; then
                die "worker needs the head's address: ray-node.sh worker HOST:PORT (make ray-worker HEAD=HOST:PORT)"
            fi
            case "$1" in *:*) ;; *) die "head address '$1' is not HOST:PORT (e.g. 10.0.0.1:6379)" ;; esac
            HEAD_ADDRESS=$1
            args=("--address=$1")
            shift ;;
        -h | --help) usage ;;
        *) die "unknown role '$role' (head or worker)" ;;
    esac

    if [ "${RLRECIPES_IN_IMAGE:-0}" != 1 ] && ! command -v ray >/dev/null 2>&1; then
        in_compose "$role" "$@"
    fi

    local gpus store
    gpus=$(gpu_count)
    store=$(object_store_bytes)
    args+=("--num-gpus=$gpus" "--object-store-memory=$store" --disable-usage-stats)
    if [ -n "${RAYNODE_NUM_CPUS:-}" ]; then args+=("--num-cpus=$RAYNODE_NUM_CPUS"); fi
    if [ -n "${RAYNODE_NODE_IP:-}" ]; then args+=("--node-ip-address=$RAYNODE_NODE_IP"); fi
    if [ "${RAYNODE_BLOCK:-1}" = 1 ]; then args+=(--block); fi

    local -a extra=()
    local more=${RAYNODE_EXTRA_ARGS:-}
    # shellcheck disable=SC2206  # word splitting is the point: one string of ray start arguments
    if [ -n "${more// /}" ]; then extra=($more); fi

    log "ray start ${args[*]} ${extra[*]} $*"
    exec ray start "${args[@]}" "${extra[@]}" "$@"
}

main "$@"

"""Host checks: disk for checkpoints, model and data; /dev/shm; host RAM; ulimits. Everything about the
host comes in through HostFacts (gathered at the edge, so tests inject it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rlrecipes.fsutil import human_bytes
from rlrecipes.plan.memory import GIB, host_ram_need
from rlrecipes.plan.architectures import architecture, param_count
from rlrecipes.verl.checkpoints import STEP_DIR_RE
from rlrecipes.preflight.checks.base import FAIL, PASS, WARN, Check, Context
from rlrecipes.preflight.checks.model import WEIGHT_PATTERNS

SHM_FAIL_BYTES = 1 * GIB  # Docker's default is 64 MB
SHM_ADVISED_BYTES = 10 * GIB  # verl's docs run containers with --shm-size=10g or more
NOFILE_ADVISED = 65536  # Ray's recommendation
NOFILE_MIN = 4096
# Ephemeral ports: verl 0.9's trainer moves its data through TransferQueue, which opens and closes a TCP connection
# per request; each closed one keeps its port in TIME_WAIT for 60 s. One PPO canary's steps held up to 27,530
# distinct ports that way (the most of every recorded run: docs/bench/gpu-canary.md, "The PPO canary's controls" and
# "seed 2"), against Linux's default range of 28,232 (32768-60999), and a run started beside one was refused a port.
# Advised: room for twice that (compose.yaml's 10240-65535 holds 55,296).
PORTS_HELD_BY_ONE_RUN = 27_530
PORTS_ADVISED = 2 * PORTS_HELD_BY_ONE_RUN
PORT_RANGE_FIX = 'sysctl -w net.ipv4.ip_local_port_range="10240 65535" (compose.yaml sets it per container)'
# TransferQueue's sockets go to Ray's node address, not loopback, where the kernel's default (tcp_tw_reuse=2) never
# lets a new connection take back a port in TIME_WAIT: once connect()'s half of the range is held, connections take
# the half bind() to port 0 uses, then fail. With 1 they take back their own ports a second on and bind() keeps its
# half (benchmarks/ports_time_wait.py --steady, docs/bench/cpu-data/ports-tw-reuse.txt).
TW_REUSE_FIX = "sysctl -w net.ipv4.tcp_tw_reuse=1 (compose.yaml sets it per container)"


def _dir_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


def _existing_checkpoint_bytes(ckpt_dir: Path) -> tuple[int, int]:
    """(bytes, count) of the step directories already under the run's checkpoint dir."""
    total, count = 0, 0
    try:
        entries = list(os.scandir(ckpt_dir))
    except OSError:
        return 0, 0
    for entry in entries:
        if STEP_DIR_RE.match(entry.name) and entry.is_dir(follow_symlinks=False):
            total += _dir_bytes(Path(entry.path))
            count += 1
    return total, count


def _model_present(path: Path) -> bool:
    return (path / "config.json").is_file() and any(p for pattern in WEIGHT_PATTERNS for p in path.glob(pattern))


def check_disk(ctx: Context) -> Check:
    run, host = ctx.run, ctx.host
    ck = ctx.plan.checkpoints
    one = ck.bytes_per_checkpoint
    saves = ck.save_steps
    keep = ck.keep_last
    kept = min(len(saves), int(keep)) if keep else len(saves)
    needs: dict[str, list[tuple[str, float]]] = {}  # path key -> [(what, bytes)]
    if one and saves:
        existing, existing_n = _existing_checkpoint_bytes(run.ckpt_dir)
        # verl prunes only what this launch saved (its list is in memory): the checkpoints already on disk stay
        # beside the new ones, unless the watchdog's --keep-last removes them (seen on the GPU: the step a first
        # launch saved outlived every later one: docs/bench/gpu-reliability.md, the seventh sitting)
        watchdog_keep = (host.watchdog or {}).get("keep_last")
        held = existing_n + kept
        if watchdog_keep:  # its --keep-last prunes them, though not before the first new save is whole
            held = max(existing_n, min(int(watchdog_keep), held))
        ckpt_need = max(0.0, (held + 1) * one - existing)
        label = f"{kept} kept + 1 in flight x {human_bytes(one)}"
        if existing_n:
            label += (f", {existing_n} already on disk (the watchdog keeps the last {watchdog_keep})" if watchdog_keep
                      else f", {existing_n} already on disk, which stay: verl prunes only what this launch saves")
        needs.setdefault(str(run.ckpt_dir), []).append((f"checkpoints ({label})", ckpt_need))
    arch = architecture(run)
    if not _model_present(run.model_path) and arch is not None:
        needs.setdefault(str(run.model_path), []).append(("base model (bf16 safetensors)", param_count(arch) * 2))
    train = Path(str(run.get("data.train_files")))
    if not train.is_file():
        needs.setdefault(str(train), []).append(("dataset", 64 * 1024 * 1024))
    if not needs:
        steps = ctx.plan.schedule.total_steps
        return Check("disk", PASS, f"no checkpoint will be saved (trainer.save_freq={ck.save_freq}, {steps} "
                     "training steps) and model and data are present")
    by_fs: dict[Any, tuple[Any, list[tuple[str, float]]]] = {}
    unknown = []
    for path, items in needs.items():
        facts = host.disk_for(path)
        if facts is None:
            unknown.append(path)
            continue
        key = facts.device
        entry = by_fs.setdefault(key, (facts, []))
        entry[1].extend(items)
    if unknown and not by_fs:
        return Check("disk", WARN, f"free space unknown for {', '.join(unknown)}", "")
    worst: Check | None = None
    for facts, items in by_fs.values():
        need = sum(b for _, b in items)
        free = facts.free_bytes
        source = f"{facts.checked} has {human_bytes(free)} free"
        wd = host.watchdog
        if wd and wd.get("quota_bytes") is not None and facts.path == str(run.ckpt_dir):
            room = wd["quota_bytes"] - (wd.get("root_bytes") or 0)
            if room < free:
                free, source = room, f"the watchdog's quota leaves {human_bytes(room)} ({wd['status']})"
        parts = " + ".join(f"{what} {human_bytes(b)}" for what, b in items if b > 0)
        if need > free:
            fix = "free space or mount a bigger volume"
            if one and saves:
                fit = int(free // one) - 1
                fix += (f", or keep fewer checkpoints: trainer.max_actor_ckpt_to_keep={fit}" if fit >= 1 else
                        ", or save less often (trainer.save_freq)")
                fix += "; run the watchdog (rlrecipes watchdog --keep-last K) to prune across restarts"
            check = Check("disk", FAIL, f"needs {human_bytes(need)} ({parts}) but {source}", fix)
        elif need > 0.8 * free:
            check = Check("disk", WARN, f"needs {human_bytes(need)} ({parts}), {source}: under 20% headroom",
                          "free space, or lower trainer.max_actor_ckpt_to_keep")
        else:
            check = Check("disk", PASS, f"needs {human_bytes(need)} ({parts}); {source}")
        order = {PASS: 0, WARN: 1, FAIL: 2}
        if worst is None or order[check.status] > order[worst.status]:
            worst = check
    return worst


def check_shm(ctx: Context) -> Check:
    host, run = ctx.host, ctx.run
    n_gpus = int(run.get("trainer.n_gpus_per_node", run.profile.gpus_per_node))
    size = host.shm_bytes
    fix = "run the container with shm_size: 10g (compose) / --shm-size=10g, or ipc: host"
    if size is None:
        return Check("shm", FAIL if n_gpus > 1 else WARN, f"{host.shm_path} is missing: Ray's object store falls back "
                     "to /tmp" + (" and NCCL cannot use shared memory" if n_gpus > 1 else ""), fix)
    text = human_bytes(size)
    if size < SHM_FAIL_BYTES:
        if n_gpus > 1:
            return Check("shm", FAIL, f"{host.shm_path} is {text} (Docker's default is 64 MB): NCCL between {n_gpus} GPUs "
                         "crashes extending its /dev/shm segments, and Ray's object store falls back to /tmp", fix)
        return Check("shm", WARN, f"{host.shm_path} is {text} (Docker's default is 64 MB): Ray's object store falls "
                     "back to /tmp (slow transfers of every batch)", fix)
    if size < SHM_ADVISED_BYTES:
        return Check("shm", WARN, f"{host.shm_path} is {text}; verl runs with >= 10 GiB", fix)
    return Check("shm", PASS, f"{host.shm_path} is {text}")


def check_host_ram(ctx: Context) -> Check:
    host = ctx.host
    need, parts = host_ram_need(ctx.run)
    if host.ram_total_bytes is None:
        return Check("host-ram", WARN, f"host RAM unknown; the run needs ~{human_bytes(need)}", "")
    detail = f"~{human_bytes(need)} ({', '.join(parts)})"
    has = (f"the container's memory limit ({host.ram_limit_source}) is" if host.ram_limit_source
           else "the host has")
    if need > host.ram_total_bytes:
        return Check("host-ram", FAIL, f"needs {detail} but {has} {human_bytes(host.ram_total_bytes)}",
                     "raise the container's memory limit (docker run --memory, compose mem_limit)"
                     if host.ram_limit_source else
                     "turn offloading off where GPU memory allows, use fewer GPUs per node, or a bigger host")
    available = host.ram_available_bytes or host.ram_total_bytes
    if need > available:
        return Check("host-ram", WARN, f"needs {detail}; {human_bytes(available)} of {human_bytes(host.ram_total_bytes)} is "
                     "available now", "stop other processes (or the container's memory limit is too low)")
    return Check("host-ram", PASS, f"needs {detail}; {human_bytes(available)} available")


def check_ulimits(ctx: Context) -> Check:
    host, run = ctx.host, ctx.run
    n_gpus = int(run.get("trainer.n_gpus_per_node", run.profile.gpus_per_node))
    nofile = host.nofile_soft
    if nofile is not None and nofile < NOFILE_MIN:
        return Check("ulimits", FAIL, f"open files limit is {nofile}: Ray workers fail with 'Too many open files'",
                     "ulimit -n 65536 (compose: ulimits: nofile: 65536)")
    problems = []
    if nofile is not None and nofile < NOFILE_ADVISED:
        problems.append(f"open files limit {nofile} < {NOFILE_ADVISED} (Ray's advice)")
    if n_gpus > 1 and host.memlock_soft is not None:
        problems.append(f"memlock limit {human_bytes(host.memlock_soft)}: NCCL wants it unlimited to pin buffers")
    if problems:
        return Check("ulimits", WARN, "; ".join(problems), "compose: ulimits: {memlock: -1, nofile: 65536}")
    memlock = "unlimited" if host.memlock_soft is None else human_bytes(host.memlock_soft)
    return Check("ulimits", PASS, f"open files {nofile or 'unlimited'}, memlock {memlock}")


def check_ports(ctx: Context) -> Check:
    image = ctx.run.image
    verl = image.verl
    if not image.spec.transfer_queue:
        return Check("ports", PASS, f"verl {verl} moves no data through TransferQueue: no port per request")
    ports = ctx.host.port_range
    if ports is None:
        return Check("ports", PASS, "ephemeral port range not readable here (not Linux?)")
    low, high = ports
    size = high - low + 1
    problems, fixes = [], []
    if size < PORTS_ADVISED:
        problems.append(f"ephemeral port range {low}-{high} holds {size} ports; verl {verl}'s TransferQueue leaves "
                        f"one in TIME_WAIT for 60 s per request, and one canary's steps held {PORTS_HELD_BY_ONE_RUN} "
                        "at a time: a second run on this network, or a relaunch within a minute of a stop, can be "
                        "refused a port ([Errno 98] Address already in use)")
        fixes.append(PORT_RANGE_FIX)
    reuse = ctx.host.tw_reuse
    if reuse is not None and reuse != 1:
        problems.append(f"net.ipv4.tcp_tw_reuse is {reuse}: TransferQueue's connections (to Ray's node address, not "
                        "loopback) cannot take back their own ports in TIME_WAIT, so they spill into the ports "
                        "bind() to port 0 takes (vLLM's, Ray's, TransferQueue's own servers)")
        fixes.append(TW_REUSE_FIX)
    if problems:
        return Check("ports", WARN, "; ".join(problems), "; ".join(fixes))
    reused = "" if reuse is None else ", tcp_tw_reuse 1"
    return Check("ports", PASS, f"ephemeral port range {low}-{high} ({size} ports){reused}")

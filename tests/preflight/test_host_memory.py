"""Host memory as a container sees it: the cgroup limit (v2 memory.max, v1 memory.limit_in_bytes), read
from a fake cgroup root, in preflight's host facts and in scripts/ray-node.sh's object-store sizing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from rlrecipes.preflight.host import cgroup_memory, gather_host_facts, host_memory

REPO = Path(__file__).resolve().parents[2]
GIB = 1024**3
MEMINFO = "MemTotal:       67108864 kB\nMemFree:        1000 kB\nMemAvailable:   62914560 kB\n"  # 64 GiB, 60 free
V1_UNLIMITED = 9223372036854771712


def cgroup_v2(root: Path, limit: str, current: int, inactive: int = 0, active: int = 0) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "memory.max").write_text(limit + "\n")
    (root / "memory.current").write_text(f"{current}\n")
    (root / "memory.stat").write_text(f"anon 1\nactive_file {active}\ninactive_file {inactive}\nfile 2\n")
    return root


def cgroup_v1(root: Path, limit: int, usage: int, inactive: int = 0, active: int = 0) -> Path:
    mem = root / "memory"
    mem.mkdir(parents=True, exist_ok=True)
    (mem / "memory.limit_in_bytes").write_text(f"{limit}\n")
    (mem / "memory.usage_in_bytes").write_text(f"{usage}\n")
    (mem / "memory.stat").write_text(f"inactive_file 5\nactive_file 6\ntotal_inactive_file {inactive}\n"
                                     f"total_active_file {active}\n")
    return root


@pytest.fixture
def meminfo(tmp_path):
    path = tmp_path / "meminfo"
    path.write_text(MEMINFO)
    return str(path)


@pytest.mark.parametrize(("make", "total", "available"), [
    # a 16 GiB container on a 64 GiB host, 5 GiB charged of which 1 GiB is page cache
    (lambda r: cgroup_v2(r, str(16 * GIB), 5 * GIB, inactive=GIB // 2, active=GIB // 2), 16 * GIB, 12 * GIB),
    (lambda r: cgroup_v1(r, 16 * GIB, 5 * GIB, inactive=GIB // 2, active=GIB // 2), 16 * GIB, 12 * GIB),
    # no limit: /proc/meminfo as it is
    (lambda r: cgroup_v2(r, "max", 5 * GIB), 64 * GIB, 60 * GIB),
    (lambda r: cgroup_v1(r, V1_UNLIMITED, 5 * GIB), 64 * GIB, 60 * GIB),
    (lambda r: r, 64 * GIB, 60 * GIB),  # no memory controller at all
    # a limit above the host's RAM changes nothing
    (lambda r: cgroup_v2(r, str(128 * GIB), GIB), 64 * GIB, 60 * GIB),
    # over the limit already: nothing available, never negative
    (lambda r: cgroup_v2(r, str(4 * GIB), 5 * GIB), 4 * GIB, 0),
])
def test_host_memory_is_lowered_to_the_cgroup_limit(tmp_path, meminfo, make, total, available):
    root = make(tmp_path / "cgroup")
    assert host_memory(meminfo, root)[:2] == (total, available)


def test_v1_is_read_before_v2_as_ray_does(tmp_path):
    root = cgroup_v2(cgroup_v1(tmp_path, 2 * GIB, GIB), str(8 * GIB), GIB)
    got = cgroup_memory(root)
    assert got.limit_bytes == 2 * GIB and got.source.endswith("memory/memory.limit_in_bytes")


def test_a_limit_without_readable_usage_still_caps(tmp_path, meminfo):
    root = tmp_path / "cg"
    root.mkdir()
    (root / "memory.max").write_text(f"{8 * GIB}\n")
    assert cgroup_memory(root).used_bytes is None
    assert host_memory(meminfo, root)[:2] == (8 * GIB, 8 * GIB)


def test_preflight_fails_a_run_that_exceeds_the_container_limit(tmp_path):
    from rlrecipes.plan.memory import host_ram_need
    from rlrecipes.preflight.checks import Context, check_host_ram
    from rlrecipes.recipe.load import resolve

    root = cgroup_v2(tmp_path / "cg", str(2 * GIB), GIB // 2)
    host = gather_host_facts([], env={}, cgroup_root=root)
    assert host.ram_total_bytes == 2 * GIB and host.ram_limit_source == str(root / "memory.max")
    run = resolve("qwen2.5-0.5b-gsm8k-ppo", env={"MODELS_DIR": str(tmp_path), "DATA_DIR": str(tmp_path),
                                                 "CKPT_DIR": str(tmp_path), "LOG_DIR": str(tmp_path)})
    need, _ = host_ram_need(run)
    assert need > 2 * GIB  # the point of the test: the host has more, the container less
    got = check_host_ram(Context(run, None, host))
    assert got.status == "fail"
    assert f"the container's memory limit ({root / 'memory.max'}) is 2.0 GiB" in got.message
    assert "mem_limit" in got.fix


# ------------------------------------------------------------------------------- ray-node.sh
def _node_sh(tmp_path: Path, cgroup_root: Path) -> int:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "env", "grep", "sort", "basename", "dirname", "df", "awk", "tail", "tr", "sed"):
        if shutil.which(tool):
            (bin_dir / tool).symlink_to(shutil.which(tool))
    (bin_dir / "ray").write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$*" > "$CALLS"\n')
    (bin_dir / "ray").chmod(0o755)
    env = {"PATH": str(bin_dir), "CALLS": str(tmp_path / "calls"), "HOME": str(tmp_path), "RAYNODE_NUM_GPUS": "0",
           "RAYNODE_CGROUP_ROOT": str(cgroup_root)}
    proc = subprocess.run(["bash", str(REPO / "scripts" / "ray-node.sh"), "head"], env=env, capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return int((tmp_path / "calls").read_text().split("--object-store-memory=")[1].split()[0])


@pytest.mark.skipif(shutil.disk_usage("/dev/shm").total < 4 * GIB, reason="needs a /dev/shm of 4 GiB or more")
@pytest.mark.parametrize("layout", ["v1", "v2"])
def test_ray_node_caps_the_object_store_at_30_percent_of_the_container_limit(tmp_path, layout):
    limit = 2 * GIB  # 30% = 614 MiB, below half of a >= 4 GiB /dev/shm
    root = tmp_path / "cg"
    cgroup_v1(root, limit, 0) if layout == "v1" else cgroup_v2(root, str(limit), 0)
    assert _node_sh(tmp_path, root) == limit * 3 // 10


@pytest.mark.skipif(shutil.disk_usage("/dev/shm").total < 4 * GIB, reason="needs a /dev/shm of 4 GiB or more")
def test_ray_node_ignores_an_unset_limit(tmp_path):
    shm = shutil.disk_usage("/dev/shm").total
    mem = int(next(l for l in open("/proc/meminfo") if l.startswith("MemTotal:")).split()[1]) * 1024
    assert _node_sh(tmp_path, cgroup_v2(tmp_path / "cg", "max", 0)) == max(min(shm // 2, mem * 3 // 10), 75 * 2**20)

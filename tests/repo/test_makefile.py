"""The Makefile as a new user meets it: help lists every stage, GPU targets fail fast on a CPU host with a
pointer to what runs here, `make -n` shows the commands, environments are stamp targets, lint is clean."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.require import linter

REPO = Path(__file__).resolve().parents[2]
STAGES = ["help", "env", "envs", "test", "build-a100", "build-hopper", "build-p40", "build-watchdog", "data", "model",
          "preflight", "plan", "validate", "launchers", "train", "resume", "merge", "eval", "report", "monitor",
          "smoke", "lock", "lint", "bench", "ray-head", "ray-worker", "runpod-template"]
GPU_TARGETS = ["build-a100", "build-hopper", "build-p40", "train", "test-gpu"]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")


def make(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    # Run as a fresh make: under `make test`, MAKEFLAGS would hand the outer command-line variables down.
    base = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    return subprocess.run(["make", "--no-print-directory", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=timeout, env=dict(base, **(env or {})))


def makefile_targets() -> dict[str, str]:
    """target -> its `## description` ('' when it has none), for explicit (non-pattern, non-file) targets."""
    targets = {}
    for line in (REPO / "Makefile").read_text().splitlines():
        m = re.match(r"^([a-z0-9][a-z0-9-]*):(?!=)[^#]*?(?:## (.*))?$", line)
        if m:
            targets[m.group(1)] = m.group(2) or ""
    return targets


def phony() -> set[str]:
    text = (REPO / "Makefile").read_text()
    block = re.search(r"^\.PHONY:((?:.*\\\n)*.*)", text, flags=re.M).group(1)
    return set(block.replace("\\\n", " ").split())


def has_gpu() -> bool:
    return subprocess.run("nvidia-smi -L", shell=True, capture_output=True).returncode == 0


def test_every_stage_exists_has_a_description_and_is_phony():
    targets = makefile_targets()
    assert set(STAGES) <= set(targets), f"missing targets: {set(STAGES) - set(targets)}"
    assert {t for t, d in targets.items() if not d} == set()
    assert phony() == set(targets), "`.PHONY` must list exactly the explicit targets"


def test_default_goal_is_help_and_help_prints_one_line_per_target():
    proc = make()
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    shown = [line.split()[0] for line in lines]
    assert shown == list(makefile_targets()), "help must list every target once, in file order"
    for line in lines:
        assert len(line.split(None, 1)) == 2, f"no description: {line!r}"


def test_variables_are_declared_at_the_top():
    text = (REPO / "Makefile").read_text()
    first_target = re.search(r"^[a-z0-9-]+:(?!=)", text, flags=re.M).start()
    head = text[:first_target]
    for var in ("RECIPE ?= qwen2.5-3b-gsm8k-grpo-lora", "PROFILE ?=", "GPUS ?=", "RUN ?=", "PYTHON ?=", "VENV ?="):
        assert var in head
    assert ".DEFAULT_GOAL := help" in head


@pytest.mark.skipif(has_gpu(), reason="this host has a GPU")
@pytest.mark.parametrize("target", GPU_TARGETS)
def test_gpu_targets_fail_fast_on_a_cpu_host_and_say_what_runs_here(target):
    start = time.monotonic()
    proc = make(target)
    elapsed = time.monotonic() - start
    assert proc.returncode != 0
    assert elapsed < 2.0, f"make {target} took {elapsed:.1f}s to refuse"
    assert f"`make {target}` needs a host with an NVIDIA GPU" in proc.stderr
    for pointer in ("make plan", "make validate", "make test"):
        assert pointer in proc.stderr
    assert "docker" not in proc.stdout, "nothing may be started before the GPU check"


def test_non_gpu_targets_do_not_check_for_a_gpu():
    for target in ("plan", "data", "model", "report", "build-watchdog", "lock", "lint"):
        assert "require-gpu" not in make("-n", target).stdout, target


def test_make_n_train_shows_the_commands():
    proc = make("-n", "train", "RECIPE=qwen2.5-0.5b-gsm8k-ppo", "GPUS=1", "ARGS=trainer.total_epochs=2")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == "scripts/require-gpu.sh train"
    assert "RECIPE=qwen2.5-0.5b-gsm8k-ppo" in lines[1] and "GPUS=1" in lines[1]
    assert lines[1].endswith("scripts/in-image.sh run trainer.total_epochs=2")


def test_profile_is_passed_only_when_set():
    assert "--profile" not in make("-n", "plan").stdout
    assert "--profile h100-80gb" in make("-n", "plan", "PROFILE=h100-80gb").stdout


@pytest.mark.parametrize("target", ["plan", "validate"])
def test_plan_and_validate_pass_args_on_as_overrides(target):
    # -o env -o envs: show the command without the environments it would build first
    dry = make("-n", "-o", "env", "-o", "envs", target, "RECIPE=qwen2.5-3b-gsm8k-grpo-lora", "PROFILE=h100-80gb",
               "ARGS=trainer.totl_epochs=15 trainer.save_freq=5")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.strip().splitlines()[-1].endswith(
        f"{target} qwen2.5-3b-gsm8k-grpo-lora --profile h100-80gb trainer.totl_epochs=15 trainer.save_freq=5")


def test_make_plan_refuses_a_misspelled_key_in_args():
    # RLRECIPES_PYTHON: scripts/host-python.sh runs this interpreter instead of making .venvs/host
    proc = make("plan", "RECIPE=qwen2.5-3b-gsm8k-grpo-lora", "ARGS=trainer.totl_epochs=15",
                env={"RLRECIPES_PYTHON": sys.executable, "PYTHONPATH": str(REPO)})
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "'trainer.totl_epochs' is not a key of verl's config" in proc.stderr
    assert "trainer.total_epochs" in proc.stderr  # the nearest valid name


@pytest.mark.verl
def test_make_validate_refuses_a_misspelled_key_in_args(verl_python):
    python = verl_python("0.8.0")  # the default profile's verl (a100-80gb)
    proc = make("-o", "env", "-o", "envs", "validate", "RECIPE=qwen2.5-3b-gsm8k-grpo-lora",
                "ARGS=trainer.totl_epochs=15", f"RLRECIPES={sys.executable} -m rlrecipes",
                env={"PYTHONPATH": str(REPO), "RLRECIPES_VERL_0_8_0_PYTHON": str(python)}, timeout=300)
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "FAIL  qwen2.5-3b-gsm8k-grpo-lora on a100-80gb (verl 0.8.0)" in proc.stdout
    assert "'trainer.totl_epochs' is not a key of verl's config" in proc.stdout


def test_env_stamps_make_the_environments_idempotent(tmp_path):
    venvs = tmp_path / "venvs"
    # No stamps: `make -q` reports out of date and `make -n` shows the builds.
    assert make("-q", "envs", f"VENVS={venvs}").returncode == 1
    dry = make("-n", "envs", f"VENVS={venvs}").stdout
    for version in ("0.5.0", "0.8.0", "0.9.1"):
        assert f"scripts/mkvenv.sh {venvs}/verl-{version} requirements/verl-{version}-cpu.txt --with-repo" in dry
    # Stamps newer than their inputs: up to date, nothing to run.
    for name in ("dev", "verl-0.5.0", "verl-0.8.0", "verl-0.9.1"):
        (venvs / name).mkdir(parents=True)
        (venvs / name / ".stamp").write_text("built\n")
    assert make("-q", "env", "envs", f"VENVS={venvs}", f"VENV={venvs}/dev").returncode == 0
    # A changed requirements file makes only its environment stale. `make -W FILE` treats FILE as just
    # modified, so this holds whatever the checkout's age (no stamp backdating against the clock).
    dry = make("-n", "-W", "requirements/verl-0.5.0-cpu.txt", "envs", f"VENVS={venvs}").stdout
    assert [line.split()[2:] for line in dry.splitlines()] == [
        ["scripts/mkvenv.sh", f"{venvs}/verl-0.5.0", "requirements/verl-0.5.0-cpu.txt", "--with-repo"]]
    # pyproject.toml is an input of every environment: changing it makes all of them stale.
    dry = make("-n", "-W", "pyproject.toml", "env", "envs", f"VENVS={venvs}", f"VENV={venvs}/dev").stdout
    assert [line.split()[line.split().index("scripts/mkvenv.sh") + 1] for line in dry.splitlines()] == [
        f"{venvs}/dev", f"{venvs}/verl-0.5.0", f"{venvs}/verl-0.8.0", f"{venvs}/verl-0.9.1"]


def test_test_target_builds_the_environments_first():
    # PYTEST_ARGS= : a caller's `make test PYTEST_ARGS=...` reaches this sub-make through MAKEFLAGS
    dry = make("-n", "test", "VENVS=/nonexistent/venvs", "VENV=/nonexistent/venvs/dev", "PYTEST_ARGS=",
               "PYTEST_WORKERS=2").stdout.splitlines()
    assert dry[-1].strip() == "/nonexistent/venvs/dev/bin/python -m pytest -n 2 --dist loadgroup"
    assert any("mkvenv.sh /nonexistent/venvs/dev requirements/dev.txt" in line for line in dry)
    assert sum("mkvenv.sh /nonexistent/venvs/verl-" in line for line in dry) == 3


def test_mbake_validates_the_makefile():
    mbake = linter("mbake")
    proc = subprocess.run([mbake, "validate", "Makefile"], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_lint_is_clean():
    for tool in ("hadolint", "shellcheck", "mbake"):
        linter(tool)
    # lint.sh takes its tools from $VENV/bin: the test interpreter's environment.
    proc = subprocess.run(["bash", "scripts/lint.sh"], capture_output=True, text=True, cwd=REPO, timeout=300,
                          env=dict(os.environ, VENV=str(Path(sys.executable).parent.parent)))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    for check in ("hadolint", "shellcheck", "mbake", "compose config", "launchers --check"):
        assert f"== {check}" in proc.stdout


def fake_nvidia_smi(tmp_path: Path, exit_code: int) -> dict:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "nvidia-smi"
    tool.write_text(f"#!/bin/sh\necho 'GPU 0: Tesla P40'\nexit {exit_code}\n")
    tool.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


@pytest.mark.parametrize(("exit_code", "returncode", "says"), [
    (0, 0, None),  # a working GPU: silent
    (9, 3, "error: `make train` needs a host with an NVIDIA GPU and driver (`nvidia-smi -L` failed here)."),
])
def test_require_gpu_follows_nvidia_smi(tmp_path, exit_code, returncode, says):
    proc = subprocess.run(["scripts/require-gpu.sh", "train"], capture_output=True, text=True, cwd=REPO,
                          env=dict(os.environ, **fake_nvidia_smi(tmp_path, exit_code)))
    assert proc.returncode == returncode
    if says is None:
        assert proc.stderr == ""
    else:
        assert proc.stderr.splitlines()[0] == says


def test_in_image_hands_over_to_the_entrypoint_inside_an_image():
    # RLRECIPES_IN_IMAGE=1: no docker involved; the entry point itself refuses the stage without a recipe.
    # Inside an image the rlrecipes CLI is on PATH: here, the test environment's.
    env = {k: v for k, v in os.environ.items() if k not in ("RECIPE", "PROFILE")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run(["scripts/in-image.sh", "data"], capture_output=True, text=True, cwd=REPO,
                          env=dict(env, RLRECIPES_IN_IMAGE="1", RECIPE=""), timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "error: stage data: no recipe: set RECIPE" in proc.stderr


def test_bench_runner_lists_every_benchmark():
    python = REPO / ".venvs" / "dev" / "bin" / "python"
    proc = subprocess.run([str(python if python.exists() else "python3"), "benchmarks/run.py", "--list"],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.stdout.split() == sorted(p.name for p in (REPO / "benchmarks").glob("bench_*.py"))

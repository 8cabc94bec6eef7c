"""The GPU-host path from a fresh clone: every command the README and docs tell a GPU-host user to type
(blocks marked `<!-- gpu-host: HOST -->`, see tests/support/gpuhost.py) runs on a simulated host -- stand-in
`nvidia-smi` for 4x A100 80GB, 1x P40 or 1x H200, a recording `docker` -- up to where only the GPU is
missing: the image it builds, the image, GPUs, volumes and environment each container would get, and the
stage it would run. A fresh clone has no .venvs: these commands must not need the test environment."""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from support.docker import compose_binary
from support.gpuhost import HOST_IMAGE, INVENTORIES, REPO, doc_blocks, docker_calls, fresh_clone, host_env

from rlrecipes.recipe.images import IMAGES

# one xdist worker runs this module: its module fixtures are built once (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("launch/test_gpu_host")]

VOLUMES = {"rlrecipes_data:/workspace/data", "rlrecipes_models:/workspace/models",
           "rlrecipes_checkpoints:/workspace/checkpoints", "rlrecipes_hf-cache:/workspace/hf-cache",
           "rlrecipes_logs:/workspace/logs", "rlrecipes_cache:/workspace/cache"}
_VALUE_OPTIONS = {"--shm-size", "--ulimit", "-e", "-v", "--gpus", "--env-file", "--entrypoint", "--name",
                  "--stop-timeout"}


def parse_run(argv: list[str]) -> dict:
    """`docker run OPTIONS IMAGE STAGE ARGS...` -> image, stage, args and the options that matter."""
    assert argv[0] == "run", argv
    opts: dict[str, list[str]] = {}
    i = 1
    while argv[i].startswith("-"):
        if argv[i] in _VALUE_OPTIONS:
            opts.setdefault(argv[i], []).append(argv[i + 1])
            i += 2
        else:
            opts.setdefault(argv[i], []).append("")
            i += 1
    env = dict(item.split("=", 1) for item in opts.get("-e", []))
    return {"image": argv[i], "stage": argv[i + 1], "args": argv[i + 2:], "gpus": opts.get("--gpus", [None])[-1],
            "volumes": set(opts.get("-v", [])), "env": env, "shm": opts.get("--shm-size", [None])[-1],
            "stop_timeout": int(opts.get("--stop-timeout", ["10"])[-1])}


def _seconds(text: str) -> int:
    """Compose's durations as `config` prints them: 2m0s, 90s, 1h2m3s."""
    total, number = 0, ""
    for char in str(text):
        if char.isdigit():
            number += char
        else:
            total += int(number or 0) * {"h": 3600, "m": 60, "s": 1}[char]
            number = ""
    return total


def compose_run(call: dict) -> dict:
    """`docker compose ... run [OPTIONS] SERVICE STAGE ARGS...` -> the same fields as parse_run, from the service
    compose.yaml defines (as the real Compose resolved it) plus the run's own -e/-v options."""
    argv = call["argv"]
    i = argv.index("run")
    opts: dict[str, list[str]] = {}
    j = i + 1
    while argv[j].startswith("-"):
        if argv[j] in ("-e", "-v"):
            opts.setdefault(argv[j], []).append(argv[j + 1])
            j += 2
        else:
            opts.setdefault(argv[j], []).append("")
            j += 1
    (service,) = call["services"]
    svc = call["config"]["services"][service]
    devices = svc.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices", [])
    volumes = {f"rlrecipes_{v['source']}:{v['target']}" for v in svc.get("volumes", []) if v["type"] == "volume"}
    env = {k: v for k, v in (svc.get("environment") or {}).items() if k in ("RECIPE", "PROFILE")}
    env.update(dict(item.split("=", 1) for item in opts.get("-e", [])))
    return {"service": service, "image": svc["image"], "stage": argv[j + 1], "args": argv[j + 2:],
            # `config` prints count: all as -1
            "gpus": ("all" if int(devices[0]["count"]) == -1 else str(devices[0]["count"])) if devices else None, "volumes": volumes | set(opts.get("-v", [])),
            "env": env, "shm": f"{int(svc.get('shm_size', 0)) // 1024**3}g",
            "stop_timeout": _seconds(svc.get("stop_grace_period", "10s")),
            "watchdog": "--no-deps" not in opts and "watchdog" in svc.get("depends_on", {})}


def stage_runs(calls: list[dict]) -> list[dict]:
    """Every stage container the calls would start, from `docker run` or `docker compose run`."""
    return [parse_run(c["argv"]) if c["argv"][0] == "run" else compose_run(c)
            for c in calls if c["argv"][0] == "run" or (c["argv"][0] == "compose" and "run" in c["argv"])]


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """One fresh clone for the module; its .venvs/host is made by the first command that needs it."""
    return fresh_clone(tmp_path_factory.mktemp("clone"))


def gpu_count(host: str) -> int:
    import json
    inv = json.loads(INVENTORIES[host].read_text())
    return sum(g.get("count", 1) for g in inv["gpus"])


def run_block(clone: Path, tmp_path: Path, host: str, script: str, timeout: float = 600):
    log = tmp_path / f"docker-{host}.jsonl"
    log.unlink(missing_ok=True)
    env = host_env(tmp_path / "bin", host, log, tmp_path / "home", compose_binary())
    (tmp_path / "home").mkdir(exist_ok=True)
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=timeout)
    return proc, docker_calls(log)


BLOCKS = [(b, h) for b in doc_blocks() for h in b.hosts]


def test_the_docs_mark_the_gpu_host_commands():
    marked = {(b.doc, h) for b, h in BLOCKS}
    assert ("README.md", "a100") in marked and ("README.md", "p40") in marked and ("README.md", "h200") in marked
    texts = "\n".join(b.text for b, _ in BLOCKS)
    for command in ("make build-a100 && make train", "make build-p40", "docker compose up p40-ppo",
                    "make smoke", "make merge eval", "make report", "docker compose up a100-grpo",
                    "make ray-head", "make ray-worker HEAD=", "make reproduce RECIPE=canary-ppo"):
        assert command in texts, f"no gpu-host block runs {command!r}"


@pytest.mark.parametrize(("block", "host"), BLOCKS, ids=[f"{b.id}-{h}" for b, h in BLOCKS])
def test_doc_block_runs_on_a_fresh_clone_up_to_the_gpu(clone, tmp_path, block, host):
    proc, calls = run_block(clone, tmp_path, host, block.text)
    assert proc.returncode == 0, f"{block.id} on {host} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert not (clone / ".venvs" / "dev").exists(), "a GPU-host command built the test environment"
    assert calls, f"{block.id}: nothing reached docker"
    family = HOST_IMAGE[host]
    image = IMAGES[family]
    for call in calls:
        argv = call["argv"]
        if argv[0] == "build":
            assert argv[argv.index("-f") + 1].endswith(f"docker/{family}.Dockerfile"), argv
            assert argv[argv.index("-t") + 1] == image.tag
        elif argv[0] == "run" or (argv[0] == "compose" and call.get("subcommand") == "run"):
            assert argv[0] == "compose", f"{block.id}: a stage ran with `docker run`, not compose.yaml's service"
            assert call.get("config_rc") == 0, call.get("config")
            run = compose_run(call)
            assert run["image"] == image.tag, f"{block.id} on {host}: {run['stage']} would run in {run['image']}"
            assert run["volumes"] >= VOLUMES
            assert run["env"]["RECIPE"], argv
            if run["gpus"] not in (None, "all"):
                assert int(run["gpus"]) <= gpu_count(host), f"--gpus {run['gpus']} on {gpu_count(host)} GPU(s)"
            if run["stage"] in ("run", "train", "resume", "reproduce", "smoke", "preflight"):
                assert run["gpus"] is not None, f"{run['stage']} without GPUs"
                assert int(run["shm"].rstrip("g")) >= 10
                # docker stop's default 10 s would SIGKILL a checkpoint save the stop guard lets finish
                assert run["stop_timeout"] >= 100
            if run["stage"] in ("run", "train", "resume", "reproduce"):
                assert run["watchdog"], f"{run['stage']} without the watchdog"
        elif argv[0] == "compose":
            assert call.get("config_rc") == 0, call.get("config")
            for name in call["services"]:
                svc = call["config"]["services"][name]
                assert svc["image"] == image.tag, f"{name} on {host} runs {svc['image']}"
                if call.get("subcommand") == "exec":
                    continue  # runs in the container `up` started (checked there)
                (device,) = svc["deploy"]["resources"]["reservations"]["devices"]
                count = device["count"]
                assert count == "all" or int(count) <= gpu_count(host), f"{name} reserves {count} GPUs"
                if "RECIPE" in svc.get("environment", {}):  # a trainer (a Ray worker trains nothing itself)
                    assert svc["depends_on"]["watchdog"]["condition"] == "service_healthy"
        else:
            pytest.fail(f"unexpected docker call {argv}")


def test_build_and_train_on_a_fresh_a100_host(clone, tmp_path):
    """The issue's first command. Old code: `make: *** [Makefile:74: build-a100] Error 127` (.venvs/dev/bin/python)."""
    proc, calls = run_block(clone, tmp_path, "a100", "make build-a100 && make train")
    assert proc.returncode == 0, proc.stderr[-3000:]
    build = calls[0]["argv"]
    assert build[:3] == ["build", "-f", str(clone / "docker" / "a100.Dockerfile")]
    (run,) = stage_runs(calls[1:])
    assert (run["service"], run["image"], run["stage"], run["gpus"]) == ("a100-grpo", IMAGES["a100"].tag, "run", "all")
    assert run["env"] == {"RECIPE": "qwen2.5-3b-gsm8k-grpo-lora", "PROFILE": ""}
    assert run["watchdog"] and run["stop_timeout"] >= 100
    host_venv = clone / ".venvs" / "host"
    site = next(host_venv.glob("lib/python*/site-packages"))
    assert not (site / "torch").exists() and not (site / "pyarrow").exists(), "the host environment must stay light"


def test_p40_walkthrough_runs_everything_in_the_p40_image(clone, tmp_path):
    """Old README: `make smoke GPUS=1` used the default RECIPE, i.e. the A100 image on a P40."""
    (p40,) = [b for b in doc_blocks() if b.doc == "README.md" and b.hosts == ("p40",)]
    proc, calls = run_block(clone, tmp_path, "p40", p40.text)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = stage_runs(calls)
    assert [r["stage"] for r in runs] == ["smoke", "reproduce", "merge", "eval", "report"]
    (canary,) = [r for r in runs if r["stage"] == "reproduce"]
    assert canary["args"][0] == "canary-ppo" and canary["watchdog"] and canary["gpus"] == "1"
    assert f"{clone}/reports:/workspace/reports" in canary["volumes"]
    assert {r["image"] for r in runs} == {IMAGES["p40"].tag}
    # the report needs no GPU: the CPU twin of the service, so it also runs where the NVIDIA runtime is missing
    assert [(r["service"], r["gpus"]) for r in runs if r["stage"] == "report"] == [("p40-cpu", None)]


@pytest.mark.parametrize(("target", "image"), [("build-a100", "a100"), ("build-p40", "p40")])
def test_build_targets_on_a_cpu_host_suggest_their_own_standin(target, image):
    """Old code: `make build-p40` on a CPU host suggested `build-image.sh a100 --standin`."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    env["PATH"] = "/usr/bin:/bin"  # no nvidia-smi
    proc = subprocess.run(["make", "--no-print-directory", target], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode != 0
    assert f"scripts/build-image.sh {image} --standin" in proc.stderr
    other = "p40" if image == "a100" else "a100"
    assert f"build-image.sh {other}" not in proc.stderr


def test_host_targets_never_use_the_test_environment():
    """Old code: build-a100, build-p40, plan, data, model, launchers, runpod-template ran .venvs/dev."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    for target in ("build-a100", "build-p40", "train", "resume", "smoke", "plan", "data", "model", "preflight",
                   "merge", "eval", "report", "monitor", "launchers", "runpod-template", "host"):
        dry = subprocess.run(["make", "-n", target], cwd=REPO, env=env, capture_output=True, text=True).stdout
        assert ".venvs/dev" not in dry and "mkvenv.sh" not in dry.split("host-python.sh")[0], (target, dry)


def test_host_requirements_are_the_packages_own_dependencies_without_torch():
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    host = [ln.strip() for ln in (REPO / "requirements" / "host.txt").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]
    assert host and set(host) <= set(deps), set(host) - set(deps)
    assert not any(re.match(r"(torch|pyarrow|numpy|transformers)\b", line) for line in host)


def test_test_environments_pin_the_cpu_build_of_torch():
    """Old code: `torch==2.13.0` -- where no local CPU wheel exists, pip takes PyPI's multi-GB CUDA build."""
    for req in sorted((REPO / "requirements").glob("*.txt")):
        for line in req.read_text().splitlines():
            if re.match(r"torch\s*==", line):
                assert re.match(r"torch==\S+\+cpu\b", line), f"{req.name}: {line}"
    mkvenv = (REPO / "scripts" / "mkvenv.sh").read_text()
    assert "https://download.pytorch.org/whl/cpu" in mkvenv


def test_env_example_lets_a_wandb_key_log_online():
    """Old .env.example set WANDB_MODE=offline: a key added there was never used online."""
    active = dict(line.split("=", 1) for line in (REPO / ".env.example").read_text().splitlines()
                  if line and not line.startswith("#"))
    assert "WANDB_API_KEY" in active and "WANDB_MODE" not in active

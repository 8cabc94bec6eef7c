"""The recovery matrix's compose column: `docker compose up SERVICE`, `docker compose stop SERVICE` mid-run, then
`docker compose up SERVICE` again -- under the real daemon and Compose v2, with compose.yaml as shipped plus only
what a CPU machine cannot do (tests/support/gpuhost.py: standin_gpu_override: the stand-in image, no GPU
reservation, the stand-in `nvidia-smi` and trainer), on the P40 recipe's own profile.

The trainer service waits for the watchdog (healthy), runs the image's `run` stage (data and model present:
skipped; resume-check, preflight, the launcher, the stop guard, the stand-in verl). `compose stop` is SIGTERM
through tini. The stopped container started again must go on from the checkpoint the stop left, reuse the run
directory its first start rendered when there is one, and finish; nothing saved lost.

Not here: the same on a profile other than the recipe's own. Such a profile's launcher is a run directory rendered
from a config validated against the image's verl, and the stand-in images' verl cannot import (no torch in them).
That path -- the engine rendering, reusing or refusing `run-PROFILE` -- runs in the recovery matrix
(tests/launch/test_recovery_matrix.py) through the real entry point against real verl environments."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml
from support.docker import docker_env, p40_standin, watchdog_image  # noqa: F401
from support.gpuhost import INVENTORIES, standin_gpu_override, tiny_model

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"

pytestmark = [pytest.mark.docker, pytest.mark.slow]

STEPS, SAVE_FREQ = 6, 2

CASES = {
    # service, image family, recipe, profile (empty: the recipe's own), inventory
    "own-profile": ("p40-ppo", "p40", "qwen2.5-0.5b-gsm8k-ppo", "", INVENTORIES["p40"]),
}


def _overrides(tmp_path: Path, service: str, inventory: Path, recipe: str, profile: str) -> list[str]:
    """compose.yaml, then the stand-in GPU file, then this test's: the recipe and profile on the service, the
    watchdog's passes every second, the checkpoints and logs bound to the host where the test reads them."""
    standin = tmp_path / "compose.standin.yaml"
    standin.write_text(standin_gpu_override(inventory, {
        "STANDIN_STEPS": str(STEPS), "STANDIN_SAVE_FREQ": str(SAVE_FREQ), "STANDIN_STEP_S": "1.5",
        "STANDIN_SAVE_S": "0.3"}))
    for name in ("checkpoints", "logs"):
        (tmp_path / name).mkdir()
    test = tmp_path / "compose.test.yaml"
    test.write_text(yaml.safe_dump({
        "services": {
            service: {"environment": {"RECIPE": recipe, "PROFILE": profile}},
            "watchdog": {"command": ["rlrecipes", "watchdog", "--root", "/workspace/checkpoints", "--keep-last", "2",
                                     "--interval", "1", "--min-free", "1M", "--progress", "/workspace/logs"],
                         "healthcheck": {"interval": "1s", "start_period": "0s", "retries": 10}}},
        "volumes": {name: {"driver": "local", "driver_opts": {"type": "none", "o": "bind",
                                                              "device": str(tmp_path / name)}}
                    for name in ("checkpoints", "logs")},
    }, sort_keys=False))
    return ["-f", str(REPO / "compose.yaml"), "-f", str(standin), "-f", str(test)]


def _inputs(where: Path, recipe: str) -> Path:
    """The P40 recipe's data and model as `make data` and `make model` leave them: GSM8K-shaped fixture rows through
    the data stage's own CLI, and a tiny model with the download marker."""
    tiny_model(where / "models" / "Qwen2.5-0.5B-Instruct")
    done = subprocess.run([sys.executable, "-m", "rlrecipes", "data", "gsm8k", "--source",
                           str(FIXTURES / "gsm8k" / "jsonl"), "--out", str(where / "data" / "gsm8k")],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return where


def _tracker(ckpt: Path) -> int | None:
    path = ckpt / "latest_checkpointed_iteration.txt"
    text = path.read_text().strip() if path.exists() else ""
    return int(text) if text else None


def _logs(docker_env, files: list[str], family: str, *services: str) -> str:  # noqa: F811
    done = docker_env.compose(*files, "--profile", family, "logs", "--no-color", *services, check=False)
    return done.stdout + done.stderr


def _exit_code(docker_env, container: str) -> int:  # noqa: F811
    return int(docker_env.run("inspect", "--format", "{{.State.ExitCode}}", container).stdout.strip())


@pytest.mark.parametrize("case", sorted(CASES))
def test_compose_up_after_compose_stop_goes_on(docker_env, p40_standin, watchdog_image, tmp_path,  # noqa: F811
                                               case):
    service, family, recipe, profile, inventory = CASES[case]
    run_dir = tmp_path / "logs" / recipe / f"run-{profile}"  # a profile not the recipe's own is rendered there
    image = f"rlrecipes/{family}:standin"
    project = f"rltest-{uuid.uuid4().hex[:8]}"
    files = ["-p", project, *_overrides(tmp_path, service, inventory, recipe, profile)]
    ckpt = tmp_path / "checkpoints" / recipe
    container = f"{project}-{service}-1"
    inputs = _inputs(tmp_path / "inputs", recipe)
    up = ("--profile", family, "up", "-d", "--no-build", service)
    try:
        for volume in ("data", "models"):  # what `make data` / `make model` (or the assets stage) leave there
            docker_env.run("run", "--rm", "-v", f"{project}_{volume}:/workspace/{volume}",
                           "-v", f"{inputs / volume}:/src:ro", "--entrypoint", "cp", image, "-a", "/src/.",
                           f"/workspace/{volume}/")
        docker_env.compose(*files, *up, timeout=300)
        deadline = time.monotonic() + 240
        while (_tracker(ckpt) or 0) < SAVE_FREQ and time.monotonic() < deadline:
            time.sleep(0.2)
        stopped_at = _tracker(ckpt)
        assert stopped_at and stopped_at < STEPS, _logs(docker_env, files, family) + docker_env.run(
            "ps", "-a", check=False).stdout
        docker_env.compose(*files, "stop", service, timeout=300)
        first = _logs(docker_env, files, family, service)
        assert _exit_code(docker_env, container) == 143, first[-4000:]
        kept = _tracker(ckpt)
        assert kept is not None and kept >= stopped_at
        assert f"train stopped by SIGTERM (exit 143); the same command goes on from the checkpoint of step {kept}" \
            in first, first[-4000:]
        manifest = (run_dir / "manifest.json").read_text() if profile else None
        record = json.loads((tmp_path / "checkpoints" / f"standin-{recipe}.json").read_text())
        assert record["resumed_from"] is None and record["events"][-1]["signal"] == "SIGTERM"

        docker_env.compose(*files, *up, timeout=300)  # the stopped container, started again
        waited = docker_env.compose(*files, "wait", service, timeout=300, check=False)
        logs_out = _logs(docker_env, files, family, service)
        assert waited.stdout.strip().endswith("0"), logs_out[-5000:]
    finally:
        docker_env.compose(*files, "down", "-v", "--remove-orphans", check=False, timeout=120)
    record = json.loads((tmp_path / "checkpoints" / f"standin-{recipe}.json").read_text())
    assert record["resumed_from"] == kept, record  # went on from the stop's checkpoint, nothing saved redone
    assert record["events"][-1] == {"finished": STEPS}, record
    assert _tracker(ckpt) == STEPS
    if profile:
        assert (run_dir / "manifest.json").read_text() == manifest  # the run directory reused, not refused
    assert "already holds" not in logs_out

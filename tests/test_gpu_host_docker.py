"""The GPU-host path under the real Docker daemon (tests/support/docker.py; stand-in base images): a checkpoint
save in flight survives `docker stop`.

The P40 stand-in image runs the generated launcher exactly as the image's entry point does (tini -> entrypoint.sh
-> exec bash recipes/<recipe>.sh -> exec the stop guard -> verl), with the stand-in trainer of
tests/fixtures/standin_verl in verl's place: verl-shaped saves that take seconds, the tracker written last, no
SIGTERM handling of its own. Old launchers piped verl into tee without exec: tini's SIGTERM ended bash, verl was
SIGKILLed with the container and a save in flight was cut."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from support.docker import docker_env  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
STANDIN = REPO / "tests" / "fixtures" / "standin_verl"
IMAGE = "rlrecipes/p40:standin"
FILES = {"actor/model_world_size_1_rank_0.pt", "actor/optim_world_size_1_rank_0.pt",
         "actor/extra_state_world_size_1_rank_0.pt", "actor/fsdp_config.json", "data.pt"}

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def p40_standin(docker_env):  # noqa: F811
    docker_env.script("bash", "scripts/build-image.sh", "p40", "--standin", timeout=1500)
    return IMAGE


def whole(step_dir: Path) -> bool:
    return {p.relative_to(step_dir).as_posix() for p in step_dir.rglob("*") if p.is_file()} == FILES


def tracker(ckpt: Path) -> int | None:
    path = ckpt / "latest_checkpointed_iteration.txt"
    text = path.read_text().strip() if path.exists() else ""
    return int(text) if text else None


def start_training(docker_env, tmp_path, save_s: float, wait_s: float):  # noqa: F811
    name = f"rltest-stop-{uuid.uuid4().hex[:8]}"
    ckpt_root, logs = tmp_path / "checkpoints", tmp_path / "logs"
    ckpt_root.mkdir()
    logs.mkdir()
    docker_env.run("run", "-d", "--name", name,
                   "-e", "PYTHONPATH=/standin", "-e", "STANDIN_STEPS=6", "-e", "STANDIN_STEP_S=0.2",
                   "-e", f"STANDIN_SAVE_S={save_s}", "-e", f"RLRECIPES_STOP_WAIT={wait_s}",
                   "-e", "STANDIN_RECORD=/workspace/logs/standin.json",
                   "-v", f"{STANDIN}:/standin:ro", "-v", f"{ckpt_root}:/workspace/checkpoints",
                   "-v", f"{logs}:/workspace/logs",
                   IMAGE, "bash", "/opt/rlrecipes/recipes/smoke-ppo.sh")
    return name, ckpt_root / "smoke-ppo", logs / "standin.json"


def wait_mid_save(docker_env, name, ckpt: Path, step: int, timeout: float = 60):  # noqa: F811
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (ckpt / f"global_step_{step}" / "actor" / "model_world_size_1_rank_0.pt").exists() \
                and tracker(ckpt) != step:
            return
        time.sleep(0.05)
    logs = docker_env.run("logs", name, check=False)
    raise AssertionError(f"no save of step {step} began:\n{logs.stdout[-3000:]}\n{logs.stderr[-3000:]}")


@pytest.mark.parametrize(("save_s", "stop_timeout", "finished"), [
    (4.0, 30, True),    # the grace period covers the save: it finishes, then verl gets SIGTERM
    (20.0, 2, False),   # `docker stop -t 2` SIGKILLs mid-save: cut, but the tracker never names it
])
def test_docker_stop_mid_save_never_leaves_the_tracker_on_a_half_written_step(docker_env, p40_standin, tmp_path,
                                                                              save_s, stop_timeout, finished):  # noqa: F811
    name, ckpt, record = start_training(docker_env, tmp_path, save_s, wait_s=25)
    try:
        wait_mid_save(docker_env, name, ckpt, 2)
        started = time.monotonic()
        docker_env.run("stop", "-t", str(stop_timeout), name, timeout=120)
        stopped_after = time.monotonic() - started
        logs = docker_env.run("logs", name, check=False)
        state = json.loads(docker_env.run("inspect", "--format", "{{json .State}}", name).stdout)
    finally:
        docker_env.run("rm", "-f", name, check=False)
    events = json.loads(record.read_text())["events"]
    terms = [e for e in events if "signal" in e]
    named = tracker(ckpt)
    assert named is None or whole(ckpt / f"global_step_{named}"), f"the tracker names a half-written step {named}"
    if finished:
        assert named == 2 and whole(ckpt / "global_step_2")
        assert [t["signal"] for t in terms] == ["SIGTERM"] and terms[0]["tracker"] == "2", (terms, logs.stderr[-2000:])
        assert state["ExitCode"] == 143 and stopped_after < stop_timeout
        assert "global_step_2 is being saved; letting it finish" in logs.stdout + logs.stderr
    else:
        assert named is None and not whole(ckpt / "global_step_2")
        assert terms == [] and state["ExitCode"] == 137  # SIGKILL at the deadline, the guard still waiting

"""The GPU-host path under the real Docker daemon (tests/support/docker.py; stand-in base images): a checkpoint
save in flight survives `docker stop`.

The P40 stand-in image runs the generated launcher exactly as the image's entry point does (tini -> entrypoint.sh
-> exec bash recipes/<recipe>.sh -> exec the stop guard -> verl), with the stand-in trainer of
tests/fixtures/standin_verl in verl's place: verl-shaped saves that take seconds, the tracker written last, no
SIGTERM handling of its own. Old launchers piped verl into tee without exec: tini's SIGTERM ended bash, verl was
SIGKILLed with the container and a save in flight was cut."""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from support.docker import FILES, IMAGE, docker_env, p40_standin, watchdog_image  # noqa: F401
from support.gpuhost import doc_blocks, fresh_clone, host_env, tiny_model

REPO = Path(__file__).resolve().parents[2]
STANDIN = REPO / "tests" / "fixtures" / "standin_verl"

pytestmark = [pytest.mark.docker, pytest.mark.slow]


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


# ------------------------------------------------------------------------- a README command, run to the GPU
def doc_command(prefix: str) -> tuple[str, str]:
    """The first line of a `gpu-host: p40` block that starts with `prefix`, comment stripped, and where it is."""
    for block in doc_blocks():
        if "p40" in block.hosts:
            for line in block.text.splitlines():
                if line.startswith(prefix):
                    return line.split("  #", 1)[0].strip(), block.id
    raise AssertionError(f"no gpu-host: p40 block runs {prefix!r}")


def test_make_train_from_the_docs_reaches_verl_on_a_simulated_p40_host(docker_env, p40_standin, watchdog_image,
                                                                      tmp_path):  # noqa: F811
    """`make train RECIPE=qwen2.5-0.5b-gsm8k-ppo GPUS=1 ...`, as docs/images.md writes it, from a fresh clone on a
    host whose `nvidia-smi` shows one P40: the host venv, the image's run stage (data and model present: skipped),
    resume-check, preflight (which sees the P40 through the stand-in nvidia-smi), the launcher, the stop guard --
    and the stand-in trainer records the verl command that would have run on the GPU."""
    command, where = doc_command("make train RECIPE=qwen2.5-0.5b-gsm8k-ppo")
    clone = fresh_clone(tmp_path / "clone")
    log = tmp_path / "docker.jsonl"
    env = host_env(tmp_path / "bin", "p40", log, tmp_path / "home", None)
    (tmp_path / "home").mkdir()
    (tmp_path / "bin" / "docker").unlink()
    (tmp_path / "bin" / "docker").symlink_to(REPO / "tests" / "fixtures" / "gpuhost" / "docker-standin")
    env.update(RLRECIPES_REAL_DOCKER=docker_env.cli, DOCKER_HOST=docker_env.host, DOCKER_BUILDKIT="1",
               DOCKER_CONFIG=str(docker_env.config_dir))
    volumes = [f"rlrecipes_{v}" for v in ("data", "models", "checkpoints", "hf-cache", "logs", "cache")]
    model = tiny_model(tmp_path / "model" / "Qwen2.5-0.5B-Instruct")
    fixtures = REPO / "tests" / "fixtures" / "gsm8k" / "jsonl"
    try:
        docker_env.run("run", "--rm", "-e", "RECIPE=qwen2.5-0.5b-gsm8k-ppo", "-e", "HF_HUB_OFFLINE=1",
                       "-v", "rlrecipes_data:/workspace/data", "-v", f"{fixtures}:/fixtures:ro",
                       IMAGE, "data", "--source", "/fixtures")
        docker_env.run("run", "--rm", "-v", "rlrecipes_models:/workspace/models", "-v", f"{model.parent}:/src:ro",
                       "--entrypoint", "cp", IMAGE, "-a", "/src/Qwen2.5-0.5B-Instruct", "/workspace/models/")
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=clone, env=env,
                              capture_output=True, text=True, timeout=900)
        record = docker_env.run("run", "--rm", "-v", "rlrecipes_checkpoints:/c", "--entrypoint", "cat", IMAGE,
                                "/c/standin-qwen2.5-0.5b-gsm8k-ppo.json", check=False)
    finally:
        docker_env.compose("-f", str(clone / "compose.yaml"), "down", "--volumes", check=False, cwd=clone)
        docker_env.run("volume", "rm", "-f", *volumes, check=False)
    assert proc.returncode == 0, f"{where}: {command}\n{proc.stdout[-3000:]}\n{proc.stderr[-4000:]}"
    assert not (clone / ".venvs" / "dev").exists()
    (call,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert call["env"].get("P40_GPUS") == "1"  # compose.yaml reserves count: ${P40_GPUS} GPUs
    assert call["argv"][-3:] == ["p40-ppo", "run", "trainer.total_epochs=2"], call
    assert record.returncode == 0, proc.stderr[-5000:] + record.stderr
    # The image's preflight saw the simulated GPU (through the stand-in nvidia-smi) and passed.
    assert re.search(r"^ok: \d+ passed, \d+ warnings?, 0 failed$", proc.stdout, flags=re.M), proc.stdout[-3000:]
    assert re.search(r"│ pass gpu-inventory +│ 1x Tesla P40", proc.stdout), proc.stdout[-3000:]
    verl = json.loads(record.stdout)
    argv = verl["argv"]
    assert argv[:3] == ["python3", "-m", "verl.trainer.main_ppo"] and argv[-1] == "trainer.total_epochs=2"
    for item in ("actor_rollout_ref.model.path='/workspace/models/Qwen2.5-0.5B-Instruct'",
                 "data.train_files='/workspace/data/gsm8k/train.parquet'",
                 "trainer.default_local_dir='/workspace/checkpoints/qwen2.5-0.5b-gsm8k-ppo'",
                 "trainer.n_gpus_per_node=1", "actor_rollout_ref.rollout.name=hf"):
        assert item in argv, (item, argv)
    assert verl["env"]["RECIPE"] == "qwen2.5-0.5b-gsm8k-ppo"
    assert verl["env"]["VERL_FILE_LOGGER_PATH"].startswith("/workspace/logs/qwen2.5-0.5b-gsm8k-ppo/metrics-")
    assert verl["events"][-1] == {"finished": 2}

"""Graceful stop: the generated launchers exec the stop guard, which lets a checkpoint save in flight finish
before SIGTERM reaches verl (rlrecipes/verl/stopguard.py). Here on the host with the stand-in trainer
(tests/fixtures/standin_verl: verl-shaped saves that take seconds, tracker written last, dies on SIGTERM);
tests/launch/test_gpu_host_docker.py does the same under the real Docker daemon with `docker stop`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlrecipes.verl.stopguard import save_in_flight

REPO = Path(__file__).resolve().parents[2]
STANDIN = REPO / "tests" / "fixtures" / "standin_verl"
FILES = {"actor/model_world_size_1_rank_0.pt", "actor/optim_world_size_1_rank_0.pt",
         "actor/extra_state_world_size_1_rank_0.pt", "actor/fsdp_config.json", "data.pt"}


def whole(step_dir: Path) -> bool:
    return {p.relative_to(step_dir).as_posix() for p in step_dir.rglob("*") if p.is_file()} == FILES


def tracker(ckpt: Path) -> int | None:
    path = ckpt / "latest_checkpointed_iteration.txt"
    return int(path.read_text()) if path.exists() else None


def start(tmp_path: Path, wait: float, save_s: float, launcher: list[str] | None = None, **env) -> tuple:
    ckpt = tmp_path / "ckpt" / "run"
    record = tmp_path / "record.json"
    environ = {**os.environ, "PYTHONPATH": f"{STANDIN}:{REPO}", "STANDIN_RECORD": str(record), "STANDIN_STEPS": "6",
               "STANDIN_STEP_S": "0.1", "STANDIN_SAVE_S": str(save_s), "RLRECIPES_STOP_WAIT": str(wait), **env}
    argv = launcher or [sys.executable, "-m", "rlrecipes.verl.stopguard", "--ckpt-dir", str(ckpt), "--",
                        sys.executable, "-m", "verl.trainer.main_ppo", f"trainer.default_local_dir={ckpt}",
                        "trainer.save_freq=1"]
    proc = subprocess.Popen(argv, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, ckpt, record


def wait_for(predicate, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def mid_save(ckpt: Path, step: int) -> bool:
    return (ckpt / f"global_step_{step}" / "actor" / "model_world_size_1_rank_0.pt").exists() and tracker(ckpt) != step


def test_sigterm_mid_save_lets_the_save_finish_then_stops_verl(tmp_path):
    proc, ckpt, record = start(tmp_path, wait=20, save_s=3)
    wait_for(lambda: mid_save(ckpt, 2))
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    events = json.loads(record.read_text())["events"]
    (term,) = [e for e in events if "signal" in e]
    assert term["signal"] == "SIGTERM" and term["tracker"] == "2", (term, err)  # verl saw it after step 2 was whole
    assert proc.returncode == 128 + signal.SIGTERM
    assert tracker(ckpt) == 2 and whole(ckpt / "global_step_2")
    assert "global_step_2 is being saved; letting it finish" in err and "global_step_2 saved" in err


def test_a_save_longer_than_the_wait_is_cut_but_never_named_by_the_tracker(tmp_path):
    proc, ckpt, record = start(tmp_path, wait=0.5, save_s=6)
    wait_for(lambda: mid_save(ckpt, 2))
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    (term,) = [e for e in json.loads(record.read_text())["events"] if "signal" in e]
    assert term["saving"] == 2 and term["tracker"] == "1"
    assert tracker(ckpt) == 1 and whole(ckpt / "global_step_1") and not whole(ckpt / "global_step_2")
    assert "not finished after" in err


def test_without_a_save_in_flight_sigterm_goes_straight_through(tmp_path):
    proc, ckpt, record = start(tmp_path, wait=30, save_s=0.2, STANDIN_STEP_S="3")
    wait_for(lambda: tracker(ckpt) == 1)
    time.sleep(0.3)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert time.monotonic() - sent < 2.5
    (term,) = [e for e in json.loads(record.read_text())["events"] if "signal" in e]
    assert term["saving"] is None and term["tracker"] == "1"


@pytest.mark.parametrize(("layout", "expected"), [
    ({"tracker": "3", "dirs": {3: 0, 4: 1}}, 4),        # 4 above the tracker, just written: in flight
    ({"tracker": "3", "dirs": {3: 0, 4: 600}}, None),    # 4 quiet for 10 min: an old interrupted save
    ({"tracker": None, "dirs": {1: 1}}, 1),              # first save, no tracker yet
    ({"tracker": "5", "dirs": {5: 1}}, None),            # the tracker already names it
    ({"tracker": "", "dirs": {}}, None),
])
def test_save_in_flight_literals(tmp_path, layout, expected):
    now = time.time()
    if layout["tracker"] is not None:
        (tmp_path / "latest_checkpointed_iteration.txt").write_text(layout["tracker"])
    for step, age in layout["dirs"].items():
        d = tmp_path / f"global_step_{step}" / "actor"
        d.mkdir(parents=True)
        (d / "model_world_size_1_rank_0.pt").write_bytes(b"x")
        for p in (d / "model_world_size_1_rank_0.pt", d, d.parent):
            os.utime(p, (now - age, now - age))
    assert save_in_flight(tmp_path, now, quiet_s=30) == expected


def test_generated_launcher_execs_the_guard_which_runs_verl(tmp_path):
    """Old launchers ran `python3 -m verl... | tee`: bash stayed PID 1's child, got the SIGTERM, exited, and
    verl was SIGKILLed with the container. Now the launcher's own process becomes the guard (exec)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    launcher = REPO / "recipes" / "smoke-ppo.sh"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "CKPT_DIR": str(tmp_path / "ckpt"), "LOG_DIR": str(tmp_path / "logs"),
           "MODELS_DIR": "/m", "DATA_DIR": "/d"}
    proc, ckpt, record = start(tmp_path, wait=20, save_s=3, launcher=["bash", str(launcher)], **env)
    ckpt = tmp_path / "ckpt" / "smoke-ppo"
    wait_for(lambda: mid_save(ckpt, 2))
    guard = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
    assert b"rlrecipes.verl.stopguard" in guard, guard  # bash exec'd the guard: same PID
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    data = json.loads(record.read_text())
    assert data["argv"][:3] == ["python3", "-m", "verl.trainer.main_ppo"]
    (term,) = [e for e in data["events"] if "signal" in e]
    assert term["tracker"] == "2" and tracker(ckpt) == 2
    assert list((tmp_path / "logs" / "smoke-ppo").glob("console-*.log"))

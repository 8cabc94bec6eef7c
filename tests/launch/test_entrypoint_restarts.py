"""The image's `run`/`resume` stages relaunch the trainer when its stop guard stopped a stalled run (exit 75),
with resume-check before each launch, a bounded number of times -- and on no other exit status: a config
error or a failed preflight must not restart-loop. A stand-in launcher exits with scripted codes."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from test_entrypoint_stages import REPO, stage

RECIPE = "qwen2.5-0.5b-gsm8k-ppo"
LAUNCHER = """#!/usr/bin/env bash
printf 'launch %s\\n' "$*" >> "$CALLS"
n=0; [ -f "$CODES_USED" ] && n=$(wc -l < "$CODES_USED")
code=$(sed -n "$((n + 1))p" "$CODES")
echo used >> "$CODES_USED"
exit "${code:-0}"
"""


def scripted(tmp_path: Path, codes: list[int], *argv: str, extra: dict | None = None):
    stage(tmp_path, "echo")  # builds the stand-in home
    (tmp_path / "home" / "recipes" / f"{RECIPE}.sh").write_text(LAUNCHER)
    (tmp_path / "codes").write_text("".join(f"{c}\n" for c in codes))
    (tmp_path / "codes_used").unlink(missing_ok=True)
    (tmp_path / "ckpt_dir" / RECIPE).mkdir(parents=True, exist_ok=True)
    os.environ.update({"CODES": str(tmp_path / "codes"), "CODES_USED": str(tmp_path / "codes_used"),
                       **(extra or {})})
    try:
        return stage(tmp_path, *argv)
    finally:
        for key in ("CODES", "CODES_USED", *(extra or {})):
            os.environ.pop(key, None)


def kinds(calls: list[str]) -> list[str]:
    return [c.split()[0] for c in calls if c.split()[0] in ("resume-check", "launch")]


@pytest.mark.parametrize("stage_name", ["run", "resume"])
def test_exit_75_relaunches_after_resume_check_until_the_run_ends(tmp_path, stage_name):
    proc, calls = scripted(tmp_path, [75, 75, 0], stage_name, "trainer.total_epochs=1")
    assert proc.returncode == 0, proc.stderr
    assert kinds(calls) == ["resume-check", "launch"] * 3, calls
    assert [c for c in calls if c.startswith("launch")] == ["launch trainer.total_epochs=1"] * 3
    assert proc.stderr.count("] the run stalled and was stopped (exit 75); relaunch") == 2, proc.stderr


@pytest.mark.parametrize("code", [1, 2, 137])
def test_other_failures_are_not_relaunched(tmp_path, code):
    proc, calls = scripted(tmp_path, [code, 0], "run")
    assert proc.returncode == code, proc.stderr
    assert kinds(calls) == ["resume-check", "launch"], calls


def test_relaunches_are_bounded(tmp_path):
    proc, calls = scripted(tmp_path, [75] * 10, "run", extra={"STALL_RESTARTS": "2"})
    assert proc.returncode == 75
    assert kinds(calls) == ["resume-check", "launch"] * 3, calls
    assert proc.stderr.strip().splitlines()[-1].endswith("(STALL_RESTARTS=2); giving up"), proc.stderr


def test_a_failed_preflight_on_relaunch_stops(tmp_path):
    # the stub rlrecipes fails preflight once the first launch has happened
    proc, calls = scripted(tmp_path, [75, 0], "run", extra={"STALL_RESTARTS": "3"})
    assert proc.returncode == 0
    stub = tmp_path / "bin" / "rlrecipes"
    stub.write_text(stub.read_text().replace("exit 0", '[ "$1" = preflight ] && [ -s "$CODES_USED" ] && exit 3\nexit 0'))
    proc, calls = scripted(tmp_path, [75, 0], "run")
    assert proc.returncode == 3, proc.stderr
    assert kinds(calls) == ["resume-check", "launch", "resume-check"], calls


def test_a_stop_signal_reaches_the_trainer_and_is_not_relaunched(tmp_path):
    stage(tmp_path, "echo")
    (tmp_path / "home" / "recipes" / f"{RECIPE}.sh").write_text(
        "#!/usr/bin/env bash\nprintf 'launch\\n' >> \"$CALLS\"\n"
        "trap 'echo term >> \"$CALLS\"; exit 75' TERM\nwhile :; do sleep 0.1; done\n")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "CALLS": str(tmp_path / "calls"),
           "PYTHONPATH": str(REPO), "RLRECIPES_HOME": str(tmp_path / "home"), "RECIPE": RECIPE, "PROFILE": "",
           **{k: str(tmp_path / k.lower()) for k in ("MODELS_DIR", "DATA_DIR", "CKPT_DIR", "LOG_DIR")}}
    env.pop("RUNPOD_POD_ID", None)
    (tmp_path / "calls").unlink(missing_ok=True)
    proc = subprocess.Popen(["bash", str(REPO / "scripts" / "entrypoint.sh"), "resume"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while "launch" not in (tmp_path / "calls").read_text() if (tmp_path / "calls").exists() else True:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 75  # the trainer's status, passed on; a stop is not a stall
    assert [c for c in (tmp_path / "calls").read_text().splitlines() if c in ("launch", "term")] == ["launch", "term"]


# A stand-in trainer under the real stop guard: resumes from verl's tracker, saves each step the way verl
# does (step dir, then the tracker), logs each step to its own launch's file; the first launch hangs after
# step 3 (alive, training nothing), a relaunch first "loads the model" for a while, then trains to the end.
RESUMING_TRAINER = r'''
import json, os, sys, time
ckpt, logs, total, pause, load = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
os.makedirs(ckpt, exist_ok=True)
tracker = os.path.join(ckpt, "latest_checkpointed_iteration.txt")
start = int(open(tracker).read()) if os.path.exists(tracker) else 0
first = not os.path.exists(os.path.join(ckpt, "launches"))
with open(os.path.join(ckpt, "launches"), "a") as fh:
    fh.write(f"start={start}\n")
if not first:
    time.sleep(load)
with open(os.path.join(logs, f"metrics-launch{start}.jsonl"), "w") as jsonl:
    for step in range(start + 1, total + 1):
        time.sleep(pause)
        os.makedirs(os.path.join(ckpt, f"global_step_{step}"))
        open(os.path.join(ckpt, f"global_step_{step}", "state.txt"), "w").write(str(step))
        open(tracker + ".tmp", "w").write(str(step))
        os.replace(tracker + ".tmp", tracker)
        jsonl.write(json.dumps({"step": step, "data": {"timing_s/step": pause}}) + "\n")
        jsonl.flush()
        if first and step == 3:
            time.sleep(3600)
'''

GUARDED_LAUNCHER = """#!/usr/bin/env bash
printf 'launch\\n' >> "$CALLS"
mkdir -p "$LOG_DIR/run"
exec python3 -c 'import sys
from rlrecipes.verl import stopguard
stopguard.STALL_POLL_S = 0.3
sys.exit(stopguard.main(sys.argv[1:]))' --ckpt-dir "$CKPT_DIR/{recipe}" --wait 5 -- \\
    python3 -c "$TRAINER" "$CKPT_DIR/{recipe}" "$LOG_DIR/run" 6 0.3 1.0
"""


def test_a_stalled_run_is_stopped_relaunched_and_resumes_from_its_last_checkpoint(tmp_path):
    """Watchdog (real, --progress) + stop guard (real, RLRECIPES_STALL_STATUS) + entrypoint `run`: the hang is
    reported, the guard stops the trainer with 75, the entrypoint relaunches it after resume-check, and the
    relaunch -- still reported stalled by the watchdog while it loads -- is not stopped, resumes at step 3
    and finishes."""
    import sys

    stage(tmp_path, "echo")
    (tmp_path / "home" / "recipes" / f"{RECIPE}.sh").write_text(GUARDED_LAUNCHER.replace("{recipe}", RECIPE))
    logs, wd = tmp_path / "log_dir" / "run", tmp_path / "wd"
    logs.mkdir(parents=True)
    wd.mkdir()
    status = wd / ".watchdog" / "status.json"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    dog = subprocess.Popen([sys.executable, "-m", "rlrecipes", "watchdog", "--root", str(wd), "--interval", "0.3",
                            "--progress", str(logs), "--stall-after", "3", "--total-steps", "6",
                            "--log-level", "error"], env=env)
    os.environ.update({"TRAINER": RESUMING_TRAINER, "RLRECIPES_STALL_STATUS": str(status)})
    started = time.monotonic()
    try:
        proc, calls = stage(tmp_path, "run")
    finally:
        for key in ("TRAINER", "RLRECIPES_STALL_STATUS"):
            os.environ.pop(key, None)
        dog.terminate()
        dog.wait(timeout=30)
    run_dir = tmp_path / "ckpt_dir" / RECIPE
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "the watchdog reports the run stalled" in proc.stderr and "relaunch 1 of 3" in proc.stderr
    assert "relaunch 2" not in proc.stderr, proc.stderr[-3000:]
    assert (run_dir / "launches").read_text().split() == ["start=0", "start=3"]
    assert (run_dir / "latest_checkpointed_iteration.txt").read_text() == "6"
    assert sorted(p.name for p in run_dir.glob("global_step_*")) == [f"global_step_{i}" for i in range(1, 7)]
    # no checkpoint dir before the first launch: resume-check runs (and repairs the tracker) before the relaunch
    assert [c.split()[0] for c in calls if c.split()[0] in ("resume-check", "launch")] == \
        ["launch", "resume-check", "launch"]
    assert time.monotonic() - started < 90

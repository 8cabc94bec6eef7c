"""The smoke runner's logic without a GPU: verl 0.5.0 console parsing (lines as a real H200 run printed
them), the pass/fail checks, the smoke reward, and the kill/timeout of a launch's whole process group."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rlrecipes.smoke import run as sr
from rlrecipes.smoke.reward import compute_score, digit_share
from rlrecipes.verl.checkpoints import tracker_path

# Shapes copied from a verl 0.5.0 run on an H200 (Ray prefix with colour codes, numpy-2 scalars).
STEP2 = ("\x1b[36m(TaskRunner pid=9557)\x1b[0m step:2 - global_seqlen/min:1490 - actor/kl_loss:np.float64(0.0279)"
         " - actor/pg_loss:np.float64(0.0014) - critic/score/mean:0.0499 - training/global_step:2"
         " - response_length/mean:32.0")
STEP3 = "(TaskRunner pid=9557) step:3 - actor/pg_loss:-0.5 - critic/score/mean:0.25 - critic/vf_loss:nan"


@pytest.mark.parametrize(
    "text, expected",
    [
        (STEP2, {2: {"global_seqlen/min": 1490.0, "actor/kl_loss": 0.0279, "actor/pg_loss": 0.0014,
                     "critic/score/mean": 0.0499, "training/global_step": 2.0, "response_length/mean": 32.0}}),
        ("step:1 - a:1 - b:np.int64(3) - c:some text - d:tensor(0.5)", {1: {"a": 1.0, "b": 3.0}}),
        ("Training Progress: 50%| 1/2 step:1", {}),  # no " - " metrics: not a metrics line
        ("Total training steps: 4\nmystep:3 - a:1", {}),
        ("step:1 - a:1\nstep:1 - a:2", {1: {"a": 2.0}}),  # last line of a step wins
    ],
)
def test_parse_steps(text, expected):
    assert sr.parse_steps(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("(TaskRunner pid=1) Load from checkpoint folder: /c/global_step_2\n(TaskRunner pid=1) Setting global step to 2", 2),
        ("(TaskRunnerV1 pid=9) INFO:verl.trainer.ppo.v1.trainer_base:Resuming from /c/global_step_2, "
         "setting global step to 2", 2),
        ("Training from scratch", None),
        ("", None),
    ],
)
def test_resumed_from(text, expected):
    assert sr.resumed_from(text) == expected


def test_check_metrics_needs_reward_and_each_loss_finite():
    steps = sr.parse_steps(STEP2 + "\n" + STEP3)
    ppo = sr.check_metrics("r", steps, sr.expected_losses(use_critic=True, use_kl_loss=False))
    assert not ppo[0].ok and "not finite ['critic/vf_loss']" in ppo[0].detail
    grpo = sr.check_metrics("r", {2: steps[2]}, sr.expected_losses(use_critic=False, use_kl_loss=True))
    assert grpo[0].ok and "actor/kl_loss=0.0279" in grpo[0].detail
    missing = sr.check_metrics("r", {2: steps[2]}, sr.expected_losses(use_critic=True, use_kl_loss=False))
    assert not missing[0].ok and "critic/vf_loss" in missing[0].detail
    assert not sr.check_metrics("r", {}, ("actor/pg_loss",))[0].ok


def test_first_launch_and_resume_checks(tmp_path):
    ckpt = tmp_path / "ckpt"
    (ckpt / "global_step_2" / "actor").mkdir(parents=True)
    tracker_path(ckpt).write_text("2")
    first = sr.check_first_launch("r", ckpt, killed=True, steps={1: {}, 2: {}})
    assert [c.ok for c in first] == [True, True]
    tracker_path(ckpt).write_text("")  # verl restarts from 0 on an empty tracker
    assert [c.ok for c in sr.check_first_launch("r", ckpt, killed=True, steps={1: {}, 2: {}})] == [True, False]
    assert not sr.check_first_launch("r", ckpt, killed=False, steps={1: {}, 2: {}})[0].ok

    resumed = "Setting global step to 2\n" + STEP3
    assert [c.ok for c in sr.check_resume("r", resumed, {3: {}, 4: {}}, 0, 4)] == [True, True, True]
    assert [c.ok for c in sr.check_resume("r", "Training from scratch", {1: {}, 2: {}, 3: {}, 4: {}}, 0, 4)] == [False, True, True]
    assert [c.ok for c in sr.check_resume("r", resumed, {3: {}}, 1, 4)] == [True, False, True]
    # verl's epoch-boundary bug: resumed at 2, exit 0, no step trained (only the resume step's validation)
    assert [c.ok for c in sr.check_resume("r", resumed, {2: {}}, 0, 4)] == [False, False, False]


def test_format_table_counts_passes():
    table = sr.format_table([sr.Check("smoke-ppo", "a", True, "fine"), sr.Check("smoke-ppo", "b", False, "broken")])
    lines = table.splitlines()
    assert lines[0].split() == ["recipe", "check", "result", "detail"]
    assert "PASS" in lines[2] and "FAIL" in lines[3] and lines[-1] == "1/2 checks passed"


@pytest.mark.parametrize(
    "response, truth, expected",
    [
        ("The answer is #### 42", "42", 1.0 + 0.1 * 2 / 21),
        ("no digits here", "42", 0.0),
        ("#### 41", "42", 0.1 * 2 / 7),
        ("", "42", 0.0),
    ],
)
def test_smoke_reward_adds_a_digit_share_term(response, truth, expected):
    assert compute_score("openai/gsm8k", response, truth) == pytest.approx(expected)
    assert digit_share("a1") == 0.5


def _script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "fake_trainer.py"
    path.write_text(textwrap.dedent(body))
    return [sys.executable, str(path)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its parent) counts as gone
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "State:\tZ" in status.read_text())


def test_launch_kills_the_whole_group_after_the_step(tmp_path):
    cmd = _script(tmp_path, f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        open({str(tmp_path / 'child.pid')!r}, "w").write(str(child.pid))
        for step in (1, 2, 3):
            print(f"(TaskRunner pid=1) step:{{step}} - critic/score/mean:0.5", flush=True)
            time.sleep(0.2 if step < 3 else 60)
        """)
    start = time.monotonic()
    result = sr.launch(cmd, dict(os.environ), tmp_path / "console.log", kill_after_step=2, timeout=60, echo=None)
    assert result.killed and not result.timed_out and result.rc != 0
    assert time.monotonic() - start < 30
    assert sorted(sr.parse_steps(result.text)) == [1, 2]
    assert (tmp_path / "console.log").read_text() == result.text
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child), "the launch's grandchild survived the kill"


def test_launch_times_out_a_silent_process(tmp_path):
    cmd = _script(tmp_path, """
        import time
        print("starting", flush=True)
        time.sleep(120)
        """)
    result = sr.launch(cmd, dict(os.environ), tmp_path / "console.log", None, timeout=2, echo=None)
    assert result.timed_out and not result.killed and result.seconds < 30
    assert result.text.startswith("starting\n") and "killed after 2 s" in result.text


def test_launch_reports_a_normal_exit(tmp_path):
    cmd = _script(tmp_path, """
        import sys
        print("step:1 - actor/pg_loss:0.1", flush=True)
        sys.exit(3)
        """)
    result = sr.launch(cmd, dict(os.environ), tmp_path / "console.log", None, timeout=60, echo=None)
    assert (result.rc, result.killed, result.timed_out) == (3, False, False)
    assert sr.parse_steps(result.text) == {1: {"actor/pg_loss": 0.1}}


def test_default_work_dir_prefers_smoke_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("SMOKE_DIR", str(tmp_path / "s"))
    assert sr.default_work_dir() == tmp_path / "s"
    monkeypatch.delenv("SMOKE_DIR")
    expected = "/workspace/smoke" if os.path.isdir("/workspace") and os.access("/workspace", os.W_OK) else "runs/smoke"
    assert sr.default_work_dir() == Path(expected)

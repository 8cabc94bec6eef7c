"""Watchdog cases that used to lose data or misbehave (issue: nothing lost, no traceback).

Each test runs the real watchdog (in-process or as a process) on a real directory tree written like
verl writes it (rlrecipes.watchdog.simulate) and checks exactly which step directories survive.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlrecipes.cli import main as cli_main
from rlrecipes.watchdog import Watchdog, WatchdogConfig, resume_check
from rlrecipes.verl.checkpoints import TRACKER_NAME
from rlrecipes.watchdog.policy import Retention
from rlrecipes.watchdog.simulate import save_checkpoint

REPO = Path(__file__).resolve().parents[2]


def age(path: Path, seconds: float = 3600) -> None:
    then = time.time() - seconds
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            os.utime(os.path.join(dirpath, name), (then, then), follow_symlinks=False)
    os.utime(path, (then, then), follow_symlinks=False)


def steps_left(exp: Path) -> list[int]:
    return sorted(int(p.name.rsplit("_", 1)[1]) for p in exp.glob("global_step_*"))


def tracker(exp: Path) -> str | None:
    try:
        return (exp / TRACKER_NAME).read_text().strip()
    except FileNotFoundError:
        return None


def dog(root: Path, keep_last: int = 2, grace: float = 60.0) -> Watchdog:
    return Watchdog(WatchdogConfig(root=root, retention=Retention(keep_last, None, grace), interval_s=None))


def test_async_save_without_a_tracker_is_never_taken_for_interrupted_saves(tmp_path):
    """verl 0.8.0 with async_save writes no tracker. The watchdog writes one; later saves must move it on,
    not be deleted as interrupted (they were, every one of them, once the first tracker existed)."""
    exp = tmp_path / "run"
    watchdog = dog(tmp_path, keep_last=2)
    for step in range(1, 7):
        save_checkpoint(exp, step, tracker=False)  # async_save: no tracker from verl
        age(exp / f"global_step_{step}", 3600 - step)
        status = watchdog.run_once()
        assert step in steps_left(exp), f"save {step} was deleted"
        assert tracker(exp) == str(step)
        assert status["healthy"]
    assert steps_left(exp) == [5, 6]
    codes = [f["code"] for f in status["findings"]]
    assert "tracker-advanced" in codes and not any(c.startswith("tracker-missing") for c in codes)
    # A save that really died above the watchdog's tracker is still cleaned up once quiet.
    (exp / "global_step_7" / "actor").mkdir(parents=True)
    age(exp / "global_step_7")
    watchdog.run_once()
    assert steps_left(exp) == [5, 6] and tracker(exp) == "6"
    # resume-check (before a launch) advances it the same way.
    save_checkpoint(exp, 8, tracker=False)
    age(exp / "global_step_8")
    findings = resume_check(tmp_path)
    assert tracker(exp) == "8", findings


def test_verl_writing_the_tracker_again_ends_the_watchdogs_ownership(tmp_path):
    exp = tmp_path / "run"
    save_checkpoint(exp, 1, tracker=False)
    age(exp / "global_step_1")
    dog(tmp_path).run_once()
    assert tracker(exp) == "1"
    save_checkpoint(exp, 2)  # verl writes its own tracker again (plain open("w"))
    save_checkpoint(exp, 3, tracker=False)  # ... then a save dies after data.pt, before the tracker
    (exp / "global_step_3" / "data.pt").unlink()
    for n in (2, 3):
        age(exp / f"global_step_{n}")
    dog(tmp_path).run_once()
    assert steps_left(exp) == [1, 2] and tracker(exp) == "2"


def test_a_step_resaved_with_another_gpu_count_keeps_the_tracker_and_the_step(tmp_path):
    """Step 4 saved on 2 GPUs, the run restarted on 4 GPUs and saved step 4 again: both shard sets are
    whole and the tracker names 4. The watchdog used to rewind the tracker to 2 and delete step 4."""
    exp = tmp_path / "run"
    save_checkpoint(exp, 2, world_size=2)
    save_checkpoint(exp, 4, world_size=2)
    save_checkpoint(exp, 4, world_size=4)
    age(exp)
    status = dog(tmp_path).run_once()
    assert steps_left(exp) == [2, 4]
    assert tracker(exp) == "4"
    assert status["healthy"] and not status["tracker_fixes"] and not status["deleted"]
    assert resume_check(tmp_path)[0].code == "tracker-ok"


def test_refuses_the_filesystem_root_and_an_empty_root(capsys):
    assert cli_main(["watchdog", "--root", "/", "--once", "--dry-run"]) == 2
    assert "refusing to watch the filesystem root" in capsys.readouterr().err
    assert cli_main(["resume-check", "--root", "/", "--check"]) == 2
    assert "refusing" in capsys.readouterr().err
    for argv in (["watchdog", "--root", "", "--once"], ["resume-check", "--root", " "],
                 ["healthcheck", "--root", ""]):
        with pytest.raises(SystemExit) as exc:
            cli_main(argv)
        assert exc.value.code == 2
        assert "empty path" in capsys.readouterr().err


def test_a_second_watchdog_on_the_same_root_exits_with_a_clear_message(tmp_path, capsys):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    first = subprocess.Popen([sys.executable, "-m", "rlrecipes", "watchdog", "--root", str(tmp_path),
                              "--interval", "0.2", "--log-level", "error"], env=env)
    try:
        status = tmp_path / ".watchdog" / "status.json"
        deadline = time.time() + 30
        while not status.exists():
            assert time.time() < deadline and first.poll() is None, "first watchdog did not start"
            time.sleep(0.05)
        assert cli_main(["watchdog", "--root", str(tmp_path), "--once"]) == 1
        err = capsys.readouterr().err
        assert "another watchdog already watches this root" in err and f"pid {first.pid}" in err
        assert "Traceback" not in err
        # resume-check only reads or rewrites the tracker: it still runs beside the watchdog.
        assert cli_main(["resume-check", "--root", str(tmp_path), "--check"]) == 0
    finally:
        first.terminate()
        first.wait(timeout=30)
    # The kernel drops the lock with the process: the next watchdog starts.
    assert cli_main(["watchdog", "--root", str(tmp_path), "--once"]) == 0


def test_healthcheck_on_broken_status_files_is_one_line_and_unhealthy(tmp_path, capsys):
    status = tmp_path / "status.json"
    cases = {"not json": "{", "list": "[]", "deep": "[" * 100_000, "nan time":
             json.dumps({"version": 1, "time": float("nan"), "interval_s": 30, "healthy": True, "findings": []}),
             "future": json.dumps({"version": 1, "time": time.time() + 86400, "interval_s": 30, "healthy": True,
                                   "findings": []}),
             "once": json.dumps({"version": 1, "time": time.time(), "interval_s": None, "healthy": True,
                                 "findings": []}),
             "binary": "\udcff"}
    for name, text in cases.items():
        status.write_bytes(text.encode("utf-8", "surrogateescape"))
        assert cli_main(["healthcheck", "--status", str(status)]) == 1, name
        out = capsys.readouterr()
        assert out.out.startswith("unhealthy: ") and out.out.count("\n") == 1, (name, out)
    assert cli_main(["healthcheck", "--status", str(tmp_path)]) == 1
    assert "is a directory" in capsys.readouterr().out
    for bad in ("nan", "inf", "-5"):
        assert cli_main(["healthcheck", "--status", str(status), "--max-age", bad]) == 2
        assert "--max-age: must be positive" in capsys.readouterr().err


RESUMED_NOTHING = ("(TaskRunner pid=7) Resuming from /ckpt/run/global_step_58\n"
                   "(TaskRunner pid=7) Setting global step to 58\n"
                   "(TaskRunner pid=7) step:58 - val-core/openai/gsm8k/reward/mean@1:0.41\n")
RESUMED_AND_TRAINED = RESUMED_NOTHING + "(TaskRunner pid=7) step:59 - critic/score/mean:0.5\n"


@pytest.mark.parametrize(("log", "total", "code", "message"), [
    (RESUMED_NOTHING, 116, 1, "resumed at step 58 and logged no training step after it"),
    (RESUMED_NOTHING, None, 1, "epoch-boundary resume bug"),
    (RESUMED_NOTHING, 58, 0, "trained after its resume"),  # resumed from the last step: nothing left to do
    (RESUMED_AND_TRAINED, 116, 0, "trained after its resume"),
    ("(TaskRunner pid=7) Training from scratch\n(TaskRunner pid=7) step:1 - x:1\n", 116, 0, "started fresh"),
])
def test_resume_check_after_a_launch_catches_a_resume_that_trained_nothing(tmp_path, capsys, log, total, code,
                                                                           message):
    console = tmp_path / "console-20260101T000000Z.log"
    console.write_text(log)
    argv = ["resume-check", "--root", str(tmp_path), "--check", "--after", str(console)]
    assert cli_main(argv + (["--total-steps", str(total)] if total else [])) == code
    assert message in capsys.readouterr().out


def test_resume_check_after_needs_a_console_log(tmp_path, capsys):
    assert cli_main(["resume-check", "--root", str(tmp_path), "--after", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert cli_main(["resume-check", "--root", str(tmp_path), "--after", str(tmp_path / "x.log")]) == 2
    assert "console log not found" in capsys.readouterr().err

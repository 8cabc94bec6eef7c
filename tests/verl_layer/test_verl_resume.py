"""`resume_check` (rlrecipes/verl/resume.py) over real directories: the exact finding for each situation a
launch can meet -- no root, nothing saved, several experiments, a save still being written, a tracker to
repair (and only reported with repair=False), a .pt file cut short -- since preflight and the entry point act
on its codes and messages."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from rlrecipes.verl.checkpoints import TRACKER_NAME
from rlrecipes.verl.resume import Finding, resume_check
from rlrecipes.watchdog.simulate import save_checkpoint


def age(path: Path, seconds: float = 3600) -> None:
    """Make everything under `path` look written `seconds` ago (quiet: not a save in progress)."""
    then = time.time() - seconds
    for p in [path, *path.rglob("*")]:
        os.utime(p, (then, then))


def test_a_root_that_does_not_exist(tmp_path):
    root = tmp_path / "nothing"
    assert resume_check(root) == [Finding(str(root), "info", "no-root", f"{root} does not exist: nothing to resume")]
    assert not root.exists()


def test_an_empty_root(tmp_path):
    assert resume_check(tmp_path) == [Finding(str(tmp_path), "info", "no-checkpoints",
                                              f"no verl checkpoints under {tmp_path}")]


def test_every_experiment_under_the_root_gets_its_finding(tmp_path):
    save_checkpoint(tmp_path / "a", 3)
    save_checkpoint(tmp_path / "b", 5)
    age(tmp_path)
    assert sorted(resume_check(tmp_path), key=lambda f: f.experiment) == [
        Finding(str(tmp_path / "a"), "info", "tracker-ok", "auto-resume continues from step 3", 3),
        Finding(str(tmp_path / "b"), "info", "tracker-ok", "auto-resume continues from step 5", 5),
    ]


def test_a_first_save_still_being_written_means_a_start_at_step_0(tmp_path):
    save_checkpoint(tmp_path / "run", 1, tracker=False)  # written just now, no tracker yet
    assert resume_check(tmp_path, grace_s=600) == [
        Finding(str(tmp_path / "run"), "info", "tracker-ok", "no checkpoint yet: the run starts at step 0", None)]


def test_a_missing_tracker_is_repaired_or_only_reported(tmp_path, caplog):
    exp = tmp_path / "run"
    save_checkpoint(exp, 2, tracker=False)
    age(tmp_path)
    (reported,) = resume_check(tmp_path, repair=False)
    assert (reported.code, reported.severity, reported.step, reported.repaired) == ("tracker-missing", "warn", 2, False)
    assert not (exp / TRACKER_NAME).exists()
    with caplog.at_level(logging.WARNING, logger="rlrecipes.watchdog"):
        (repaired,) = resume_check(tmp_path, repair=True)
    assert repaired == Finding(reported.experiment, "warn", "tracker-missing", reported.message, 2, repaired=True)
    assert (exp / TRACKER_NAME).read_text() == "2"
    assert [r.getMessage() for r in caplog.records] == [f"{exp}: tracker was missing; rewrote it to step 2"]
    (after,) = resume_check(tmp_path)
    assert (after.code, after.step) == ("tracker-ok", 2)


def test_a_pt_file_cut_short_is_not_resumable_unless_zip_checks_are_off(tmp_path):
    exp = tmp_path / "run"
    save_checkpoint(exp, 1)
    save_checkpoint(exp, 2)
    data = exp / "global_step_2" / "data.pt"
    data.write_bytes(data.read_bytes()[:-40])  # the zip's end record is gone
    age(tmp_path)
    (checked,) = resume_check(tmp_path, repair=False)
    assert (checked.code, checked.step) == ("tracker-incomplete", 1)
    (unchecked,) = resume_check(tmp_path, repair=False, zip_check=False)
    assert (unchecked.code, unchecked.step) == ("tracker-ok", 2)

"""The watchdog's first pass on a disk already below the budget, before any checkpoint exists.

Old behaviour: with `--min-free 20G` and less free space, the first pass found `budget-exceeded` (need 0 bytes,
room negative) and turned unhealthy, so a trainer waiting for `service_healthy` never started on a small disk
-- although there was nothing to free yet. Now that is a warning; the pass is unhealthy only when not even one
checkpoint of the planner's size fits into the space that is left."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from rlrecipes.cli import main as cli_main
from rlrecipes.watchdog.policy import Retention, plan
from rlrecipes.watchdog.simulate import save_checkpoint

GIB = 1024**3


def first_pass(room: int, floor: int, first: int = 0):
    return plan([], time.time(), Retention(keep_last=2), room, floor_bytes=floor, first_checkpoint_bytes=first)


@pytest.mark.parametrize(("room", "floor", "first", "codes", "healthy"), [
    (-5 * GIB, 20 * GIB, 0, ["below-floor"], True),                     # 15 GiB free, floor 20 GiB: warn only
    (-5 * GIB, 20 * GIB, 10 * GIB, ["below-floor"], True),              # a 10 GiB checkpoint still fits in 15
    (-5 * GIB, 20 * GIB, 16 * GIB, ["first-checkpoint-cannot-fit"], False),  # 16 GiB does not
    (5 * GIB, 20 * GIB, 16 * GIB, [], True),                            # above the floor: nothing to say
    (-1, 0, 0, ["below-floor"], True),                                  # quota already used up
])
def test_first_pass_budget_literals(room, floor, first, codes, healthy):
    decided = first_pass(room, floor, first)
    assert [f.code for f in decided.findings] == codes
    assert decided.healthy is healthy
    assert decided.deletions == []


def test_below_floor_message_says_nothing_to_free():
    (finding,) = first_pass(-5 * GIB, 20 * GIB).findings
    assert finding.severity == "warn"
    assert "5.0 GiB below the budget" in finding.message or "5 GiB below the budget" in finding.message
    assert "nothing to free yet" in finding.message and "--checkpoint-size" in finding.message


def status_of(root: Path) -> dict:
    return json.loads((root / ".watchdog" / "status.json").read_text())


def test_cli_first_pass_on_a_disk_below_min_free_is_healthy(tmp_path):
    free = shutil.disk_usage(tmp_path).free
    above = str(free * 4)  # a floor far above what this filesystem has free
    assert cli_main(["watchdog", "--root", str(tmp_path), "--min-free", above, "--once"]) == 0
    codes = {f["code"]: f["severity"] for f in status_of(tmp_path)["findings"]}
    assert codes.get("below-floor") == "warn" and "budget-exceeded" not in codes


def test_cli_first_pass_is_unhealthy_when_one_checkpoint_cannot_fit(tmp_path):
    free = shutil.disk_usage(tmp_path).free
    assert cli_main(["watchdog", "--root", str(tmp_path), "--min-free", str(free * 4),
                     "--checkpoint-size", str(free * 2), "--once"]) == 1
    codes = [f["code"] for f in status_of(tmp_path)["findings"]]
    assert "first-checkpoint-cannot-fit" in codes


def test_once_a_checkpoint_exists_an_unmet_budget_is_still_an_error(tmp_path):
    save_checkpoint(tmp_path / "run", 1)
    free = shutil.disk_usage(tmp_path).free
    assert cli_main(["watchdog", "--root", str(tmp_path), "--min-free", str(free * 4), "--once",
                     "--grace", "0"]) == 1
    assert "budget-exceeded" in [f["code"] for f in status_of(tmp_path)["findings"]]

"""`rlrecipes merge` when the disk fills up: the output directory sits on a size-capped tmpfs (as
tests/watchdog/test_watchdog_fs.py mounts them); a second merge over an earlier one hits ENOSPC. The earlier merged
model survives whole, nothing half-written is left beside it, and the error is one line."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support.verl_checkpoint import build_checkpoint, run_merge

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.verl]


def digest(tree: Path) -> dict[str, str]:
    return {p.relative_to(tree).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(tree.rglob("*")) if p.is_file()}


def test_a_merge_that_runs_out_of_space_keeps_the_previous_merge_whole(run_in_verl, tmp_path, disk):  # noqa: F811
    run_dir = build_checkpoint(run_in_verl, tmp_path, "0.5.0", kind="full")
    mount = disk("tmpfs", 64 * 1024 * 1024)
    out = mount / "merged"
    argv = ["merge", str(run_dir), "--step", "2", "--out", str(out), "--dtype", "fp32", "--base",
            str(tmp_path / "base")]
    first = run_merge(run_in_verl, "0.5.0", argv)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    before = digest(out)
    assert "model.safetensors" in before and "merge-info.json" in before
    used = sum((p.stat().st_size for p in mount.rglob("*") if p.is_file()), 0)
    # room for a little more than the earlier merge: the second one's work files do not fit
    subprocess.run(["mount", "-o", f"remount,size={used + 256 * 1024}", str(mount)], check=True)
    second = run_merge(run_in_verl, "0.5.0", [*argv, "--force"])
    assert second.returncode != 0
    assert digest(out) == before, "the earlier merged model changed"
    # beside it only the merger's log and the merge's lock file (rlrecipes/after/merge.py claim_output)
    assert sorted(p.name for p in mount.iterdir()
                  if not p.name.endswith((".model_merger.log", ".merge.lock"))) == ["merged"]
    # one line, naming the cause (verl's merger's exception) and the log with its whole output
    assert "Traceback" not in second.stderr, second.stderr[-3000:]
    errors = [line for line in second.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and second.stderr.rstrip().endswith(errors[0]), second.stderr[-3000:]
    assert "No space left on device" in errors[0] and "merged.model_merger.log" in errors[0], errors


def test_a_merge_killed_midway_keeps_the_previous_merge_whole(run_in_verl, verl_python, tmp_path):
    run_dir = build_checkpoint(run_in_verl, tmp_path, "0.5.0", kind="full")
    out = tmp_path / "out" / "merged"
    argv = ["merge", str(run_dir), "--step", "2", "--out", str(out), "--dtype", "fp32", "--base",
            str(tmp_path / "base")]
    first = run_merge(run_in_verl, "0.5.0", argv)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    before = digest(out)
    code = f"import sys; from rlrecipes.cli import main; sys.exit(main({[*argv, '--force']!r}))"
    proc = subprocess.Popen([str(verl_python("0.5.0")), "-c", code], env=dict(os.environ, PYTHONPATH=str(REPO)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        # mid-merge: verl's merger has written its output into the work directory beside --out
        while not list(out.parent.glob(".merged.partial-*/verl_merged/config.json")):
            assert proc.poll() is None and time.monotonic() < deadline, "the merge ended before it was killed"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert digest(out) == before, "the earlier merged model changed"
    (left,) = out.parent.glob(".merged.partial-*")  # what the killed merge left
    again = run_merge(run_in_verl, "0.5.0", [*argv, "--force"])  # and the next merge is not in its way
    assert again.returncode == 0, again.stderr[-3000:]
    assert digest(out)["model.safetensors"] == before["model.safetensors"]
    # ... and removes it, saying so
    assert not list(out.parent.glob(".merged.partial-*")), "the killed merge's work directory is still there"
    assert f"removed {left}: the work directory of an earlier merge into merged that did not finish" in again.stderr

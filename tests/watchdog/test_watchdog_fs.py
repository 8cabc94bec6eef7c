"""The watchdog against real filesystems: size-capped tmpfs and loop-mounted ext4 where writes hit ENOSPC.

Mounting needs root; without it (or when the kernel refuses) these tests skip. Every scenario checks
exactly which step directories remain and what the tracker says.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from support.require import skip_or_fail

from rlrecipes.cli import main as cli_main
from rlrecipes.watchdog import Watchdog, WatchdogConfig, resume_check
from rlrecipes.verl.checkpoints import TRACKER_NAME
from rlrecipes.watchdog.policy import Retention
from rlrecipes.watchdog.runner import RESERVE_BYTES
from rlrecipes.watchdog.simulate import save_checkpoint, write_pt

REPO = Path(__file__).resolve().parents[2]
KIB, MIB = 1024, 1024 * 1024


def age(path: Path, seconds: float = 3600) -> None:
    """Make everything under `path` look untouched for `seconds` (a quiet, finished save)."""
    then = time.time() - seconds
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            os.utime(os.path.join(dirpath, name), (then, then), follow_symlinks=False)
    os.utime(path, (then, then), follow_symlinks=False)


def steps_left(exp: Path) -> list[str]:
    return sorted((p.name for p in exp.glob("global_step_*")), key=lambda n: int(n.rsplit("_", 1)[1]))


def tracker(exp: Path) -> str | None:
    try:
        return (exp / TRACKER_NAME).read_text()
    except FileNotFoundError:
        return None


def run_once(root: Path, keep_last: int = 2, keep_every: int | None = None, grace: float = 60.0,
             quota: int | None = None, min_free: int | None = None) -> dict:
    cfg = WatchdogConfig(root=root, retention=Retention(keep_last, keep_every, grace), quota_bytes=quota,
                         min_free_bytes=min_free, interval_s=None)
    return Watchdog(cfg).run_once()


def save_until_full(exp: Path, first_step: int, **kw) -> int:
    """Save steps like verl until the filesystem refuses; returns the step whose save failed."""
    step = first_step
    while True:
        try:
            save_checkpoint(exp, step, **kw)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
            return step
        step += 1
        assert step < first_step + 100, "the filesystem never filled up"


# -- retention ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["tmpfs", "ext4"])
@pytest.mark.parametrize(("keep_last", "keep_every", "expected"), [
    (3, None, ["global_step_4", "global_step_5", "global_step_6"]),
    (1, None, ["global_step_6"]),
    (2, 2, ["global_step_2", "global_step_4", "global_step_5", "global_step_6"]),
    (1, 4, ["global_step_4", "global_step_6"]),
])
def test_steady_state_keeps_the_newest_k(disk, kind, keep_last, keep_every, expected):
    root = disk(kind, 32 * MIB)
    exp = root / "run"
    for step in range(1, 7):
        save_checkpoint(exp, step, world_size=2, shard_bytes=64 * KIB)
    age(exp)
    status = run_once(root, keep_last=keep_last, keep_every=keep_every)
    assert steps_left(exp) == expected
    assert tracker(exp) == "6"
    assert status["healthy"] is True
    assert sorted(d["step"] for d in status["deleted"]) == sorted(
        {1, 2, 3, 4, 5, 6} - {int(n.split("_")[-1]) for n in expected})
    # A second pass is a no-op.
    assert run_once(root, keep_last=keep_last, keep_every=keep_every)["deleted"] == []


def test_each_experiment_under_the_root_keeps_its_own_k(disk):
    root = disk("ext4", 32 * MIB)
    a, b = root / "ppo", root / "project" / "grpo"
    for step in range(1, 5):
        save_checkpoint(a, step, critic=True)
    for step in (10, 20, 30):
        save_checkpoint(b, step)
    (root / "notes").mkdir()
    (root / "notes" / "global_step_1.txt").write_text("not a checkpoint")
    age(root)
    status = run_once(root, keep_last=2)
    assert steps_left(a) == ["global_step_3", "global_step_4"]
    assert steps_left(b) == ["global_step_20", "global_step_30"]
    assert (root / "notes" / "global_step_1.txt").read_text() == "not a checkpoint"
    assert {e["name"]: e["resume_step"] for e in status["experiments"]} == {"ppo": 4, "project/grpo": 30}


def test_restart_prunes_what_verls_in_memory_list_forgot(disk, caplog):
    root = disk("ext4", 32 * MIB)
    exp = root / "run"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    sim = [sys.executable, "-m", "rlrecipes.watchdog.simulate", "--root", str(exp), "--shard-bytes", "32K",
           "--max-keep", "2"]
    # First trainer process: saves 1..4, keeps 2 in memory -> removes actor/ of 1 and 2 only (as verl does).
    subprocess.run([*sim, "--steps", "4"], check=True, env=env, capture_output=True)
    assert steps_left(exp) == ["global_step_1", "global_step_2", "global_step_3", "global_step_4"]
    assert not (exp / "global_step_1" / "actor").exists() and (exp / "global_step_1" / "data.pt").exists()
    # Restart: resumes from the tracker (4) and saves 5..6; its list starts empty, so 3 and 4 stay forever.
    subprocess.run([*sim, "--steps", "2"], check=True, env=env, capture_output=True)
    assert steps_left(exp) == [f"global_step_{i}" for i in range(1, 7)]
    age(exp)
    with caplog.at_level(logging.INFO, logger="rlrecipes.watchdog"):
        status = run_once(root, keep_last=2)
    assert steps_left(exp) == ["global_step_5", "global_step_6"]
    assert tracker(exp) == "6"
    assert {d["step"]: d["reason"] for d in status["deleted"]} == {
        1: "incomplete", 2: "incomplete", 3: "keep-last", 4: "keep-last"}
    # What verl's own pruning left is routine, said as such, not a warning a user reads as lost checkpoints.
    said = {r.getMessage().split()[1].rsplit("_", 1)[1]: r for r in caplog.records
            if r.getMessage().startswith("deleted")}
    assert {step: r.levelno for step, r in said.items()} == {str(i): logging.INFO for i in range(1, 5)}
    assert "what verl's own pruning left of it" in said["1"].getMessage()


# -- interrupted saves and ENOSPC -----------------------------------------------------------------------

@pytest.mark.parametrize(("kind", "size"), [("tmpfs", 4 * MIB), ("ext4", 8 * MIB)])
def test_disk_full_mid_save_leaves_a_partial_dir_that_is_removed(disk, kind, size):
    root = disk(kind, size)
    exp = root / "run"
    failed = save_until_full(exp, 1, world_size=2, shard_bytes=256 * KIB)
    assert failed >= 2  # at least one whole checkpoint fitted
    partial = exp / f"global_step_{failed}"
    assert partial.is_dir() and not (partial / "data.pt").exists()
    assert tracker(exp) == str(failed - 1)  # verl writes the tracker last: unchanged by the failed save
    age(exp)
    status = run_once(root, keep_last=1)
    assert steps_left(exp) == [f"global_step_{failed - 1}"]
    assert {d["step"]: d["reason"] for d in status["deleted"] if d["reason"] == "interrupted"} == {failed: "interrupted"}
    assert tracker(exp) == str(failed - 1)
    # The space is back: the retried save fits.
    save_checkpoint(exp, failed, world_size=2, shard_bytes=256 * KIB)
    assert tracker(exp) == str(failed)


@pytest.mark.parametrize(("case", "damage", "reason"), [
    ("no data.pt", lambda d: (d / "data.pt").unlink(), "data.pt missing"),
    ("rank 1 model shard missing", lambda d: (d / "actor" / "model_world_size_2_rank_1.pt").unlink(),
     "model shards missing for ranks [1]"),
    ("truncated optim shard", lambda d: os.truncate(d / "actor" / "optim_world_size_2_rank_0.pt", 1000),
     "truncated"),
    ("critic incomplete", lambda d: (d / "critic" / "fsdp_config.json").unlink(), "critic/: fsdp_config.json"),
])
def test_crash_mid_save_above_the_tracker_is_an_interrupted_save(disk, case, damage, reason):
    root = disk("tmpfs", 16 * MIB)
    exp = root / "run"
    for step in (1, 2):
        save_checkpoint(exp, step, critic=True)
    save_checkpoint(exp, 3, critic=True, tracker=False)
    damage(exp / "global_step_3")
    age(exp)
    status = run_once(root, keep_last=5)
    step3 = next(s for s in status["experiments"][0]["steps"] if s["step"] == 3)
    assert step3["state"] == "interrupted" and reason in step3["problem"], case
    assert steps_left(exp) == ["global_step_1", "global_step_2"]
    assert tracker(exp) == "2"


def test_whole_save_above_the_tracker_is_interrupted_too(disk):
    # Died between data.pt and the tracker: verl would resume from the tracker and overwrite it anyway.
    root = disk("tmpfs", 16 * MIB)
    exp = root / "run"
    save_checkpoint(exp, 1)
    save_checkpoint(exp, 2, tracker=False)
    age(exp)
    run_once(root, keep_last=5)
    assert steps_left(exp) == ["global_step_1"]
    assert tracker(exp) == "1"


def test_budget_too_small_for_one_checkpoint_alarms_and_keeps_the_newest(disk):
    root = disk("tmpfs", 1536 * KIB)
    exp = root / "run"
    save_checkpoint(exp, 1, world_size=1, shard_bytes=300 * KIB)
    age(exp)
    status = run_once(root, keep_last=1, min_free=0)
    assert status["healthy"] is False
    assert [f["code"] for f in status["findings"] if f["severity"] == "error"] == ["budget-exceeded"]
    assert status["budget"]["need_bytes"] > status["budget"]["room_after_bytes"]
    assert steps_left(exp) == ["global_step_1"]
    # The alarm was right: the next save really fails with ENOSPC ...
    with pytest.raises(OSError) as err:
        save_checkpoint(exp, 2, world_size=1, shard_bytes=300 * KIB)
    assert err.value.errno == errno.ENOSPC
    age(exp)
    # ... and the watchdog removes the half-written save, keeps the newest complete one, still alarms.
    status = run_once(root, keep_last=1, min_free=0)
    assert steps_left(exp) == ["global_step_1"]
    assert tracker(exp) == "1"
    assert status["healthy"] is False
    status_file = root / ".watchdog" / "status.json"
    assert json.loads(status_file.read_text())["healthy"] is False
    assert cli_main(["healthcheck", "--status", str(status_file)]) == 1


@pytest.mark.parametrize("kind", ["tmpfs", "ext4"])
def test_a_volume_filled_to_the_last_byte_still_gets_a_fresh_status(disk, kind):
    """Something else fills the checkpoint volume: the sidecar's next pass still writes its status (from the
    reserve it keeps there), says the disk is full, keeps the checkpoint, and sets the reserve aside again once
    space is back. Without the reserve the pass died on ENOSPC and the status went stale."""
    root = disk(kind, 8 * MIB)
    exp = root / "run"
    save_checkpoint(exp, 5, world_size=1, shard_bytes=300 * KIB)
    age(exp)
    dog = Watchdog(WatchdogConfig(root=root, retention=Retention(2, None, 60.0), min_free_bytes=0, interval_s=5))
    assert dog.run_once()["healthy"] is True
    reserve = root / ".watchdog" / "reserve"
    assert reserve.stat().st_size == RESERVE_BYTES
    before = {p: p.read_bytes() for p in (exp / "global_step_5").rglob("*") if p.is_file()}
    for n, chunk in enumerate((64 * KIB, 4 * KIB, 1)):  # to the last block, and ext4's inline bytes
        with open(root / f"filler{n}", "wb", buffering=0) as fh:
            try:
                while True:
                    fh.write(bytes(chunk))
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    status = dog.run_once()  # raised OSError(ENOSPC) before the reserve
    on_disk = json.loads((root / ".watchdog" / "status.json").read_text())
    assert on_disk["time"] == status["time"] and on_disk["healthy"] is False
    assert "disk-full" in [f["code"] for f in on_disk["findings"] if f["severity"] == "error"]
    assert cli_main(["healthcheck", "--status", str(root / ".watchdog" / "status.json")]) == 1
    assert not reserve.exists()
    assert {p: p.read_bytes() for p in before} == before and tracker(exp) == "5"
    dog.run_once()  # what the reserve did not spend is too little to set it aside again: tried next pass
    assert not reserve.exists()
    for filler in root.glob("filler*"):
        filler.unlink()
    status = dog.run_once()
    assert status["healthy"] is True and reserve.stat().st_size == RESERVE_BYTES
    assert json.loads((root / ".watchdog" / "status.json").read_text())["healthy"] is True


@pytest.mark.parametrize(("budget", "expected", "healthy"), [
    # 3 checkpoints of ~0.9 MiB on a 4 MiB disk: ~1.3 MiB free.
    ({"min_free": 0}, ["global_step_1", "global_step_2", "global_step_3"], True),
    ({"min_free": 1 * MIB}, ["global_step_2", "global_step_3"], True),  # budget beats keep-last 3
    ({"min_free": 2 * MIB}, ["global_step_3"], True),
    ({"min_free": 4 * MIB}, ["global_step_3"], False),  # cannot be met: alarm, newest kept
])
def test_min_free_deletes_oldest_first_beyond_keep_last(disk, budget, expected, healthy):
    root = disk("tmpfs", 4 * MIB)
    exp = root / "run"
    for step in (1, 2, 3):
        save_checkpoint(exp, step, world_size=1, shard_bytes=300 * KIB)
    age(exp)
    status = run_once(root, keep_last=3, **budget)
    assert steps_left(exp) == expected
    assert status["healthy"] is healthy
    assert tracker(exp) == "3"


@pytest.mark.parametrize(("quota", "expected", "healthy"), [
    # ~3.5 MiB in use: 4 checkpoints of ~0.63 MiB and a 1 MiB blob; the next save needs ~0.63 MiB.
    (64 * MIB, ["global_step_2", "global_step_3", "global_step_4"], True),  # step 1: keep-last 3
    (3276 * KIB, ["global_step_3", "global_step_4"], True),
    (2662 * KIB, ["global_step_4"], True),
    (2 * MIB, ["global_step_4"], False),  # the blob alone nearly fills it: alarm, newest kept
])
def test_quota_counts_everything_under_the_root(disk, quota, expected, healthy):
    root = disk("ext4", 32 * MIB)
    exp = root / "run"
    for step in (1, 2, 3, 4):
        save_checkpoint(exp, step, world_size=1, shard_bytes=200 * KIB)  # ~0.6 MiB each
    (root / "other").mkdir()
    write_pt(root / "other" / "blob.bin", 1 * MIB)  # not a checkpoint, but it counts against the quota
    age(root)
    status = run_once(root, keep_last=3, quota=quota)
    assert steps_left(exp) == expected
    assert (root / "other" / "blob.bin").exists()
    assert status["healthy"] is healthy


# -- tracker repair ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("case", "content", "expected"), [
    ("missing", None, "3"),
    ("empty", "", "3"),
    ("unparsable", "global_step_3", "3"),
    ("negative", "-1", "3"),
    ("names a deleted step", "9", "3"),
    ("names an incomplete step", "4", "3"),
    ("valid", "3", "3"),
])
def test_resume_guard_repairs_the_tracker(disk, case, content, expected):
    root = disk("tmpfs", 16 * MIB)
    exp = root / "run"
    for step in (1, 2, 3, 4):
        save_checkpoint(exp, step)
    (exp / "global_step_4" / "data.pt").unlink()
    if content is None:
        (exp / TRACKER_NAME).unlink()
    else:
        (exp / TRACKER_NAME).write_text(content)
    age(exp)
    findings = resume_check(root, repair=True)
    assert tracker(exp) == expected, case
    assert steps_left(exp) == ["global_step_1", "global_step_2", "global_step_3", "global_step_4"]  # deletes nothing
    repaired = [f for f in findings if f.repaired]
    assert len(repaired) == (0 if case == "valid" else 1)


def test_resume_check_cli_check_mode_reports_without_writing(disk):
    root = disk("tmpfs", 16 * MIB)
    exp = root / "run"
    save_checkpoint(exp, 2)
    (exp / TRACKER_NAME).write_text("")
    age(exp)
    assert cli_main(["resume-check", "--root", str(root), "--check"]) == 1
    assert tracker(exp) == ""
    assert cli_main(["resume-check", "--root", str(root)]) == 0
    assert tracker(exp) == "2"
    findings = json.loads(_run_cli_json(["resume-check", "--root", str(root), "--json"]))
    assert [(f["code"], f["step"]) for f in findings] == [("tracker-ok", 2)]


def _run_cli_json(argv: list[str]) -> str:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "rlrecipes", *argv], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_no_complete_checkpoint_is_an_error(disk):
    root = disk("tmpfs", 16 * MIB)
    exp = root / "run"
    save_checkpoint(exp, 1, tracker=False)
    (exp / "global_step_1" / "data.pt").unlink()
    age(exp)
    findings = resume_check(root, repair=True)
    assert [(f.severity, f.code) for f in findings] == [("error", "no-complete-checkpoint")]
    assert tracker(exp) is None


def test_tracker_being_rewritten_by_verl_is_left_alone(disk):
    # verl's open("w") leaves the tracker empty for a moment; replacing it then would race verl's write.
    root = disk("tmpfs", 16 * MIB)
    exp = root / "run"
    save_checkpoint(exp, 1)
    save_checkpoint(exp, 2)
    age(exp)
    (exp / TRACKER_NAME).write_text("")  # fresh mtime
    status = run_once(root, keep_last=1, grace=60)
    assert tracker(exp) == ""
    assert steps_left(exp) == ["global_step_2"]  # retention goes on; the newest whole step is kept
    assert status["tracker_fixes"] == []


@pytest.mark.verl
@pytest.mark.parametrize("version", ["0.5.0", "0.8.0"])
def test_verl_resumes_from_the_repaired_tracker(disk, run_in_verl, version):
    root = disk("tmpfs", 16 * MIB)
    exp = root / "run"
    for step in (1, 2, 3):
        save_checkpoint(exp, step)
    import shutil

    shutil.rmtree(exp / "global_step_3")  # the tracker now names a step that is gone
    code = ("from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path\n"
            f"print('RESULT', find_latest_ckpt_path({str(exp)!r}))")
    before = run_in_verl(version, code)
    assert "RESULT None" in before.stdout, before.stdout + before.stderr  # verl would start from scratch
    age(exp)
    resume_check(root, repair=True)
    after = run_in_verl(version, code)
    assert f"RESULT {exp}/global_step_2" in after.stdout, after.stdout + after.stderr


# -- safety -----------------------------------------------------------------------------------------------

def test_symlinks_out_of_the_root_are_never_followed(disk, tmp_path):
    root = disk("tmpfs", 16 * MIB)
    outside = disk("tmpfs", 16 * MIB)
    exp = root / "run"
    save_checkpoint(outside / "elsewhere", 1)
    for step in (1, 2, 3):
        save_checkpoint(outside / "other-run", step)
    for step in (2, 3, 4):
        save_checkpoint(exp, step)
    (exp / "global_step_1").symlink_to(outside / "elsewhere" / "global_step_1")  # step-like link
    (exp / "global_step_2" / "actor" / "huggingface" / "shared").symlink_to(outside / "elsewhere")  # inside a step
    (root / "linked-run").symlink_to(outside / "other-run")  # a whole experiment behind a link
    before = sorted(str(p.relative_to(outside)) for p in outside.rglob("*"))
    age(root)
    status = run_once(root, keep_last=1, quota=1)  # tightest budget: delete all it may
    assert steps_left(exp) == ["global_step_1", "global_step_4"]  # the link itself stays; 2, 3 deleted
    assert (exp / "global_step_1").is_symlink()
    assert sorted(str(p.relative_to(outside)) for p in outside.rglob("*")) == before
    assert (root / "linked-run").is_symlink()
    assert [e["name"] for e in status["experiments"]] == ["run"]
    codes = {f["code"] for f in status["findings"]}
    assert "symlink-ignored" in codes and "budget-exceeded" in codes


def test_checkpoint_being_written_is_never_touched(disk):
    root = disk("tmpfs", 64 * MIB)
    exp = root / "run"
    save_checkpoint(exp, 1)
    save_checkpoint(exp, 2)
    age(exp)
    errors: list[BaseException] = []

    def writer():
        try:  # a slow save: every .pt chunk sleeps, so the dir keeps seeing writes
            save_checkpoint(exp, 3, world_size=2, shard_bytes=64 * KIB, critic=True, pause_s=0.15)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    dog = Watchdog(WatchdogConfig(root=root, retention=Retention(keep_last=1, grace_s=1.0), quota_bytes=1,
                                  interval_s=None))
    passes, seen_writing = 0, 0
    while thread.is_alive():
        status = dog.run_once()
        passes += 1
        states = {s["step"]: s["state"] for s in status["experiments"][0]["steps"]}
        if states.get(3) == "writing":
            seen_writing += 1
        assert (exp / "global_step_2").is_dir()  # the newest complete one survives the budget
        time.sleep(0.05)
    thread.join()
    assert not errors, errors
    assert passes >= 5 and seen_writing >= 3
    assert tracker(exp) == "3"
    status = dog.run_once()  # step 3 now complete (still recent): newest complete, 2 goes
    assert steps_left(exp) == ["global_step_3"]
    assert [d["step"] for d in status["deleted"]] == [2]


def test_trash_left_by_a_killed_removal_is_emptied(disk):
    root = disk("tmpfs", 16 * MIB)
    exp = root / "run"
    save_checkpoint(exp, 1)
    half = root / ".watchdog" / "trash" / "run__global_step_0__deadbeef"
    (half / "actor").mkdir(parents=True)
    write_pt(half / "actor" / "model_world_size_1_rank_0.pt", 512 * KIB)
    age(exp)
    run_once(root, keep_last=1)
    assert list((root / ".watchdog" / "trash").iterdir()) == []
    assert steps_left(exp) == ["global_step_1"]


# -- reporting ---------------------------------------------------------------------------------------------

def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_metrics_endpoint_over_loopback(disk):
    root = disk("tmpfs", 8 * MIB)
    exp = root / "run"
    for step in (1, 2, 3):
        save_checkpoint(exp, step, world_size=1, shard_bytes=300 * KIB)
    save_checkpoint(exp, 4, tracker=False)
    (exp / "global_step_4" / "data.pt").unlink()
    age(exp)
    hogs = root / "ray"
    (hogs / "session_2026-01-01").mkdir(parents=True)
    write_pt(hogs / "session_2026-01-01" / "log.bin", 200 * KIB)
    cfg = WatchdogConfig(root=root, retention=Retention(keep_last=3, grace_s=60), interval_s=5.0,
                         hogs=[("ray", "ray", hogs)], min_free_bytes=7 * MIB)
    dog = Watchdog(cfg)
    port = dog.serve_metrics("127.0.0.1", 0)
    try:
        code, _ = _get(f"http://127.0.0.1:{port}/healthz")
        assert code == 503  # no pass yet
        dog.run_once()
        code, text = _get(f"http://127.0.0.1:{port}/metrics")
        assert code == 200
        samples = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
                   for line in text.splitlines() if line and not line.startswith("#")}
        assert samples['rlrecipes_watchdog_checkpoints{experiment="run",state="complete"}'] == 3
        assert samples['rlrecipes_watchdog_checkpoints{experiment="run",state="interrupted"}'] == 1
        assert samples['rlrecipes_watchdog_newest_complete_step{experiment="run"}'] == 3
        assert samples["rlrecipes_watchdog_deleted_total"] == 3  # the interrupted one + 1 and 2 for the budget
        assert samples["rlrecipes_watchdog_healthy"] == 0  # 7 MiB free cannot be had on an 8 MiB disk
        assert samples[f'rlrecipes_watchdog_hog_bytes{{name="ray",path="{hogs}"}}'] >= 200 * KIB
        assert "# TYPE rlrecipes_watchdog_healthy gauge" in text
        code, body = _get(f"http://127.0.0.1:{port}/healthz")
        assert code == 503 and "budget cannot hold" in body
        code, body = _get(f"http://127.0.0.1:{port}/status")
        assert code == 200 and json.loads(body)["root"] == str(root)
    finally:
        dog.metrics.stop()


def test_hogs_are_measured_by_kind(disk):
    root = disk("tmpfs", 16 * MIB)
    ray, wandb, hf = root / "tmp-ray", root / "logs", root / "hf"
    for d in (ray / "session_a", ray / "session_b", wandb / "wandb" / "offline-run-x", wandb / "wandb" / "run-y", hf):
        d.mkdir(parents=True)
        write_pt(d / "f.bin", 100 * KIB)
    (ray / "not-a-session").mkdir()
    write_pt(ray / "not-a-session" / "f.bin", 500 * KIB)
    cfg = WatchdogConfig(root=root, interval_s=None,
                         hogs=[("ray", "ray", ray), ("wandb", "wandb", wandb), ("hf-cache", "hf-cache", hf),
                               ("gone", "path", root / "missing")])
    hogs = {h["name"]: h for h in Watchdog(cfg).run_once()["hogs"]}
    assert hogs["ray"]["items"] == 2 and 200 * KIB <= hogs["ray"]["bytes"] < 400 * KIB
    assert hogs["wandb"]["items"] == 1 and 100 * KIB <= hogs["wandb"]["bytes"] < 200 * KIB
    assert hogs["hf-cache"]["items"] == 1 and hogs["hf-cache"]["bytes"] >= 100 * KIB
    assert hogs["gone"]["bytes"] is None


def test_watchdog_process_loop_health_and_sigterm(disk):
    root = disk("tmpfs", 16 * MIB)
    exp = root / "run"
    for step in (1, 2, 3):
        save_checkpoint(exp, step)
    age(exp)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    status_file = root / ".watchdog" / "status.json"
    proc = subprocess.Popen([sys.executable, "-m", "rlrecipes", "watchdog", "--root", str(root), "--keep-last", "1",
                             "--interval", "0.2", "--grace", "60"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 20
        while not status_file.exists() and time.time() < deadline:
            time.sleep(0.1)
        health = subprocess.run([sys.executable, "-m", "rlrecipes", "healthcheck", "--root", str(root)],
                                env=env, capture_output=True, text=True)
        assert health.returncode == 0, health.stdout
        assert steps_left(exp) == ["global_step_3"]
        save_checkpoint(exp, 4)
        save_checkpoint(exp, 5)
        age(exp)
        deadline = time.time() + 10
        while steps_left(exp) != ["global_step_5"] and time.time() < deadline:
            time.sleep(0.1)
        assert steps_left(exp) == ["global_step_5"]
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert "deleted" in err and "stopped" in err
    # A status nobody refreshes any more is unhealthy.
    stale = subprocess.run([sys.executable, "-m", "rlrecipes", "healthcheck", "--root", str(root),
                            "--max-age", "0.01"], env=env, capture_output=True, text=True)
    assert stale.returncode == 1 and "not running" in stale.stdout


def test_a_cached_settled_checkpoint_that_changes_is_read_again(disk):
    root = disk("tmpfs", 16 * MIB)
    exp = root / "run"
    for step in (1, 2):
        save_checkpoint(exp, step)
    age(exp)
    dog = Watchdog(WatchdogConfig(root=root, retention=Retention(keep_last=5, grace_s=60), interval_s=None))
    assert [s["state"] for s in dog.run_once()["experiments"][0]["steps"]] == ["complete", "complete"]
    # verl's own pruning after a restart removes actor/ of an old step: the step dir's mtime moves.
    import shutil

    shutil.rmtree(exp / "global_step_1" / "actor")
    age(exp)  # even with every mtime set back, the directory's mtime_ns differs from the cached one
    status = dog.run_once()
    assert {d["step"]: d["reason"] for d in status["deleted"]} == {1: "incomplete"}
    assert steps_left(exp) == ["global_step_2"]
    # A shard replaced inside actor/ (rename over it) is noticed too.
    os.replace(exp / "global_step_2" / "data.pt", exp / "global_step_2" / "actor" / "model_world_size_2_rank_1.pt")
    age(exp)
    step2 = dog.run_once()["experiments"][0]["steps"][0]
    assert step2["problem"] == "data.pt missing"


@pytest.fixture
def public_tmp():
    """A temp dir an unprivileged user can traverse (pytest's are private to root); set up before `disk`."""
    base = Path(tempfile.mkdtemp(prefix="watchdog-perm-"))
    os.chmod(base, 0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def test_a_watchdog_that_may_not_delete_says_so_loudly(public_tmp, disk):
    # The image runs as UID 10001; a trainer running as root with umask 022 leaves it unable to delete.
    base = public_tmp
    root = disk("tmpfs", 16 * MIB, base=base)
    exp = root / "run"
    for step in (1, 2, 3):
        save_checkpoint(exp, step)
    age(exp)
    status_dir = base / "status"
    status_dir.mkdir()
    os.chown(status_dir, 10001, 10001)
    # The checkout may sit in a directory only root can enter (a CI clone in `mktemp -d`, mode 0700):
    # give the unprivileged user its own readable copy of the package.
    src = base / "src"
    shutil.copytree(REPO / "rlrecipes", src / "rlrecipes", ignore=shutil.ignore_patterns("__pycache__"))
    for path in [src, *src.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    env = dict(os.environ, PYTHONPATH=str(src))

    def drop():
        os.setgid(10001)
        os.setuid(10001)

    # The watchdog needs only the standard library: any python3 the unprivileged user can execute will do
    # (this venv's interpreter may live under /root).
    python = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.access(p, os.X_OK)), None)
    if python is None:
        skip_or_fail("fs", "no system python3 for an unprivileged user")
    done = subprocess.run([python, "-m", "rlrecipes", "watchdog", "--root", str(root), "--once",
                           "--keep-last", "1", "--status", str(status_dir / "status.json")],
                          env=env, capture_output=True, text=True, preexec_fn=drop, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    status = json.loads((status_dir / "status.json").read_text())
    failed = [f for f in status["findings"] if f["code"] == "delete-failed"]
    assert [f["step"] for f in failed] == [1, 2] and all(f["severity"] == "error" for f in failed)
    assert "Permission denied" in failed[0]["message"] and "Permissions" in failed[0]["message"]
    assert steps_left(exp) == ["global_step_1", "global_step_2", "global_step_3"]


def test_dry_run_changes_nothing_and_reports_the_plan(disk, capsys):
    root = disk("tmpfs", 16 * MIB)
    exp = root / "run"
    for step in (1, 2, 3):
        save_checkpoint(exp, step)
    save_checkpoint(exp, 4, tracker=False)
    (exp / "global_step_4" / "data.pt").unlink()
    (exp / TRACKER_NAME).write_text("")
    age(exp)
    assert cli_main(["watchdog", "--root", str(root), "--once", "--dry-run", "--keep-last", "1"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert {p["step"]: p["reason"] for p in summary["planned_deletions"]} == {
        1: "keep-last", 2: "keep-last", 4: "interrupted"}
    assert [(f["new_step"], f["applied"]) for f in summary["tracker_fixes"]] == [(3, False)]
    assert steps_left(exp) == ["global_step_1", "global_step_2", "global_step_3", "global_step_4"]
    assert tracker(exp) == ""
    # The same pass for real.
    assert cli_main(["watchdog", "--root", str(root), "--once", "--keep-last", "1"]) == 0
    assert steps_left(exp) == ["global_step_3"]
    assert tracker(exp) == "3"


@pytest.mark.verl
@pytest.mark.parametrize("version", ["0.5.0", "0.8.0"])
def test_a_checkpoint_saved_by_verls_own_checkpoint_manager_is_complete(run_in_verl, tmp_path, version):
    # The completeness rules against the real writer: test_merge's tiny LoRA actor saved by verl's
    # FSDPCheckpointManager (CPU, gloo), plus data.pt written with torch.save as _save_checkpoint does.
    from support.verl_checkpoint import build_checkpoint

    run_dir = build_checkpoint(run_in_verl, tmp_path, version, kind="lora")
    step_dir = run_dir / "global_step_2"
    saved = run_in_verl(version, f"import torch; torch.save({{'sampler': {{'epoch': 0}}}}, {str(step_dir / 'data.pt')!r})")
    assert saved.returncode == 0, saved.stderr[-2000:]
    age(run_dir)
    status = run_once(run_dir.parent, keep_last=1)
    step = status["experiments"][0]["steps"][0]
    assert (step["step"], step["state"], step["problem"]) == (2, "complete", "")
    assert status["experiments"][0]["resume_step"] == 2
    # A torch.save killed halfway leaves a file without its zip directory: not resumable.
    shard = step_dir / "actor" / "model_world_size_1_rank_0.pt"
    os.truncate(shard, shard.stat().st_size // 2)
    age(run_dir)
    findings = resume_check(run_dir.parent, repair=False)
    assert [(f.severity, f.code) for f in findings] == [("error", "no-complete-checkpoint")]
    status = run_once(run_dir.parent, keep_last=1)
    step = status["experiments"][0]["steps"][0]
    assert (step["state"], step["deleted"]) == ("damaged", False)  # kept for salvage, and loud
    assert "model_world_size_1_rank_0.pt is truncated" in step["problem"]
    assert status["healthy"] is False


def test_an_error_that_lasts_is_logged_when_it_starts_every_ten_minutes_and_when_it_clears(tmp_path, monkeypatch,
                                                                                            caplog):
    """A budget that cannot hold the next save (a full volume) lasts for hours: one ERROR when it starts, one
    every REPEAT_S while it lasts, an INFO line when it is gone -- not a line every pass (compose's pass is 30 s)."""
    from rlrecipes.watchdog import runner

    root = tmp_path / "ckpt"
    save_checkpoint(root / "run", 1, world_size=1, shard_bytes=64 * 1024)
    age(root)
    clock = [1_800_000_000.0]
    monkeypatch.setattr(runner.time, "time", lambda: clock[0])
    dog = Watchdog(WatchdogConfig(root=root, retention=Retention(2, None, 60.0), quota_bytes=1, interval_s=30.0))
    with caplog.at_level(logging.INFO, logger="rlrecipes.watchdog"):
        for _ in range(41):  # 20 minutes of 30 s passes
            assert any(f["code"] == "budget-exceeded" for f in dog.run_once()["findings"])
            clock[0] += 30
        dog.config.quota_bytes = None  # room again
        dog.run_once()
    said = [(r.levelname, r.getMessage()) for r in caplog.records if "budget" in r.getMessage()
            or "cleared" in r.getMessage()]
    assert [level for level, _ in said] == ["ERROR", "ERROR", "ERROR", "INFO"], said
    assert "(still" not in said[0][1] and said[1][1].endswith("(still, for 600 s)")
    assert said[2][1].endswith("(still, for 1200 s)")
    assert said[3][1] == "budget-exceeded cleared after 1230 s"

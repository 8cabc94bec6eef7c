"""Stalls: a run that stops logging training steps turns the watchdog unhealthy (stand-in trainer that hangs)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlrecipes.cli import main as cli_main
from rlrecipes.watchdog.progress import STALL_FLOOR_S, Progress

REPO = Path(__file__).resolve().parents[2]

# A stand-in trainer: logs STEPS training steps the way verl's file and console loggers do, then hangs
# like verl 0.9.1 did after an error in its rollout engine (alive, holding its GPUs, training nothing).
HANGING_TRAINER = r'''
import json, sys, time
log_dir, steps, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
with open(f"{log_dir}/metrics-20260101T000000Z.jsonl", "w") as jsonl, \
        open(f"{log_dir}/console-20260101T000000Z.log", "w") as console:
    for step in range(1, steps + 1):
        time.sleep(pause)
        jsonl.write(json.dumps({"step": step, "data": {"timing_s/step": pause}}) + "\n")
        console.write(f"(TaskRunner pid=7) step:{step} - timing_s/step:{pause}\n")
        jsonl.flush(); console.flush()
    console.write("(WorkerDict pid=9) ERROR rollout engine: CUDA error: an illegal memory access\n")
    console.flush()
    time.sleep(3600)
'''


def test_progress_reads_steps_and_derives_the_limit(tmp_path):
    log = tmp_path / "metrics-1.jsonl"
    log.write_text("".join(json.dumps({"step": s, "data": {"timing_s/step": 60.0}}) + "\n" for s in (1, 2, 3)))
    (tmp_path / "console-1.log").write_text("(TaskRunner pid=7) step:4 - timing_s/step:300 - x:1\nnoise\n"
                                            '{"step": 99')  # a line still being written: not read yet
    for path in tmp_path.iterdir():
        os.utime(path, (900.0, 900.0))  # lines already there are dated by their file
    progress = Progress([tmp_path])
    progress.update(now=1000.0)
    assert progress.step_seen_at == 900.0
    assert progress.step == 4 and sorted(progress.step_times) == [60.0, 60.0, 60.0, 300.0]
    assert progress.limit_s() == max(STALL_FLOOR_S, 5 * 60.0 + 300)
    stalled, _, facts = progress.verdict(now=progress.step_seen_at + progress.limit_s() + 1)
    assert stalled and facts["step"] == 4
    # verl's file logger opens with "wb": a relaunch truncates the file; steps are read again from 0.
    log.write_text(json.dumps({"step": 5, "data": {}}) + "\n")
    os.utime(log, (5000.0, 5000.0))  # a new file's earlier lines are dated by the file
    progress.update(now=5000.0)
    assert progress.step == 5 and progress.step_seen_at == 5000.0
    assert not progress.verdict(now=5000.0 + 10)[0]


def test_progress_is_per_file_and_a_finished_run_is_not_stalled(tmp_path):
    old = tmp_path / "metrics-20250101T000000Z.jsonl"  # an earlier run that reached step 116 long ago
    old.write_text(json.dumps({"step": 116, "data": {}}) + "\n")
    os.utime(old, (100.0, 100.0))
    new = tmp_path / "metrics-20260101T000000Z.jsonl"
    new.write_text(json.dumps({"step": 3, "data": {}}) + "\n")
    os.utime(new, (9000.0, 9000.0))
    progress = Progress([tmp_path], stall_after_s=600.0, total_steps=116)
    progress.update(now=9010.0)
    assert progress.step == 3 and not progress.verdict(now=9010.0)[0]  # step 3 < 116 is still progress
    with open(new, "a") as fh:
        fh.write(json.dumps({"step": 4, "data": {}}) + "\n")
    progress.update(now=9500.0)
    assert progress.step == 4 and progress.step_seen_at == 9500.0
    assert progress.verdict(now=9500.0 + 601)[0]
    with open(new, "a") as fh:
        fh.write(json.dumps({"step": 116, "data": {}}) + "\n")  # the last step: finished, quiet from now on
    progress.update(now=10_000.0)
    stalled, _, facts = progress.verdict(now=10_000.0 + 10**6)
    assert not stalled and facts["finished"]


def test_before_the_first_step_the_startup_limit_applies(tmp_path):
    progress = Progress([tmp_path], startup_s=100.0)
    progress.update(now=0.0)
    assert not progress.verdict(now=99.0)[0]
    stalled, message, _ = progress.verdict(now=101.0)
    assert stalled and "no training step logged" in message


@pytest.mark.parametrize(("argv", "message"), [
    (["--stall-after", "nan", "--progress", "logs"], "--stall-after: must be positive"),
    (["--stall-after", "0", "--progress", "logs"], "--stall-after: must be positive"),
    (["--stall-after", "10"], "--stall-after: a stall limit needs the run's logs to follow"),
    (["--stall-startup", "inf", "--progress", "logs"], "--stall-startup: must be positive"),
])
def test_stall_flags_are_validated(tmp_path, capsys, argv, message):
    assert cli_main(["watchdog", "--root", str(tmp_path), "--once", *argv]) == 2
    assert message in capsys.readouterr().err


def _health(status: Path) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "rlrecipes", "healthcheck", "--status", str(status)],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=60)
    return done.returncode, done.stdout


GUARD = r'''
import sys
from rlrecipes.verl import stopguard
stopguard.STALL_POLL_S = 0.3
sys.exit(stopguard.main(sys.argv[1:]))
'''


def _guarded_beside_the_watchdog(tmp_path: Path, trainer: str, *watchdog_args: str):
    """The trainer under the stop guard (as the launchers start it, polling every 0.3 s), the watchdog following
    its logs and giving the guard its status. Returns (the guard's CompletedProcess, seconds it took)."""
    ckpt, logs = tmp_path / "ckpt", tmp_path / "logs"
    ckpt.mkdir()
    logs.mkdir()
    status = ckpt / ".watchdog" / "status.json"
    env = dict(os.environ, PYTHONPATH=str(REPO), RLRECIPES_STALL_STATUS=str(status))
    dog = subprocess.Popen([sys.executable, "-m", "rlrecipes", "watchdog", "--root", str(ckpt), "--interval", "0.3",
                            "--progress", str(logs), *watchdog_args, "--log-level", "error"], env=env)
    started = time.monotonic()
    try:
        guard = subprocess.run([sys.executable, "-c", GUARD, "--ckpt-dir", str(ckpt), "--wait", "5", "--",
                                sys.executable, "-c", trainer, str(logs), "3", "0.3"],
                               env=env, capture_output=True, text=True, timeout=120)
    finally:
        dog.terminate()
        dog.wait(timeout=30)
    return guard, time.monotonic() - started


def test_a_hanging_trainer_turns_the_watchdog_unhealthy_and_a_resumed_one_healthy_again(tmp_path):
    ckpt, logs = tmp_path / "ckpt", tmp_path / "logs"
    ckpt.mkdir()
    logs.mkdir()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    trainer = subprocess.Popen([sys.executable, "-c", HANGING_TRAINER, str(logs), "4", "0.3"])
    dog = subprocess.Popen([sys.executable, "-m", "rlrecipes", "watchdog", "--root", str(ckpt), "--interval", "0.3",
                            "--progress", str(logs), "--stall-after", "3", "--log-level", "error"], env=env)
    status = ckpt / ".watchdog" / "status.json"
    try:
        deadline = time.time() + 60
        seen_healthy_step = None
        while time.time() < deadline:
            if status.exists():
                data = json.loads(status.read_text())
                if data["healthy"] and (data.get("progress") or {}).get("step"):
                    seen_healthy_step = data["progress"]["step"]
                if not data["healthy"]:
                    break
            time.sleep(0.2)
        assert seen_healthy_step is not None, "never healthy while the trainer made progress"
        code, out = _health(status)
        assert code == 1 and "no new training step" in out and "last: step 4" in out, out
        assert trainer.poll() is None  # the stand-in is still alive: only the logs tell it hangs
        # The relaunch replaces the trainer; it resumes and logs steps again (a new launch, a new file).
        trainer.kill()
        trainer.wait()
        (logs / "metrics-20260101T000100Z.jsonl").write_text(json.dumps({"step": 5, "data": {}}) + "\n")
        deadline = time.time() + 30
        while time.time() < deadline and _health(status)[0] != 0:
            time.sleep(0.3)
        code, out = _health(status)
        assert code == 0, out
    finally:
        for proc in (trainer, dog):
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)


def test_the_stop_guard_stops_a_stalled_run_so_a_restart_policy_resumes_it(tmp_path):
    """The trainer runs under the stop guard (as the launchers start it); the watchdog follows its logs.
    On run-stalled the guard stops the hanging trainer and exits 75, which the image's `run` stage
    turns into a relaunch (tests/launch/test_stages.py) that resumes from the last whole checkpoint."""
    from rlrecipes.verl.stopguard import EXIT_STALLED

    guard, took = _guarded_beside_the_watchdog(tmp_path, HANGING_TRAINER, "--stall-after", "2")
    assert guard.returncode == EXIT_STALLED, guard.stderr[-2000:]
    assert "the watchdog reports the run stalled" in guard.stderr and "no new training step" in guard.stderr
    assert took < 60


def test_the_stop_guard_ignores_a_stale_or_broken_status(tmp_path):
    from rlrecipes.verl.stopguard import watchdog_says_stalled

    status = tmp_path / "status.json"
    finding = {"code": "run-stalled", "message": "no new training step", "severity": "error"}
    now = time.time()
    for content, expected in [
        ({"time": now, "interval_s": 60, "findings": [finding]}, "no new training step"),
        ({"time": now - 3600, "interval_s": 60, "findings": [finding]}, None),  # the watchdog is gone
        ({"time": "x", "findings": [finding]}, None),
        ({"time": now, "interval_s": 60, "findings": [{"code": "budget-exceeded"}]}, None),
        ([], None),
    ]:
        status.write_text(json.dumps(content))
        assert watchdog_says_stalled(status, now) == expected, content
    status.write_text("{")
    assert watchdog_says_stalled(status, now) is None
    assert watchdog_says_stalled(tmp_path / "missing.json", now) is None


@pytest.mark.parametrize("run", ["qwen2.5-0.5b-gsm8k-ppo", "seed-3/canary-grpo-lora", "seed-3/x/canary-grpo-lora"])
def test_the_log_root_is_followed_two_directories_down(tmp_path, run):
    """compose.yaml's watchdog follows $LOG_DIR, which holds one directory per run (launchers log there), and a
    seed's runs one level further down (`rlrecipes reproduce --seed N`: LOG_DIR/seed-N/<run>); no deeper."""
    folder = tmp_path / run
    folder.mkdir(parents=True)
    (folder / "metrics-20260101T000000Z.jsonl").write_text(json.dumps({"step": 7, "data": {}}) + "\n")
    progress = Progress([tmp_path], stall_after_s=60.0)
    progress.update(now=time.time())
    assert progress.step == (None if run.count("/") > 1 else 7)


def test_a_relaunched_guard_gets_the_whole_stall_limit_of_its_own(tmp_path):
    """The status still reports the previous launch's stall while the relaunch loads its model."""
    from rlrecipes.verl.stopguard import watchdog_says_stalled

    status = tmp_path / "status.json"
    now = time.time()
    status.write_text(json.dumps({"time": now, "interval_s": 30, "progress": {"limit_s": 900.0},
                                  "findings": [{"code": "run-stalled", "message": "stalled"}]}))
    assert watchdog_says_stalled(status, now, started=now - 899) is None
    assert watchdog_says_stalled(status, now, started=now - 901) == "stalled"


def test_the_compose_gate_ignores_a_stall_but_not_other_errors(tmp_path):
    status = tmp_path / "status.json"
    base = {"version": 1, "time": time.time(), "interval_s": 30, "healthy": False}
    stall = {"code": "run-stalled", "severity": "error", "message": "no new training step", "experiment": ""}
    full = {"code": "budget-exceeded", "severity": "error", "message": "the next save will not fit", "experiment": "x"}
    for findings, plain, ignoring in [([stall], 1, 0), ([stall, full], 1, 1), ([full], 1, 1)]:
        status.write_text(json.dumps({**base, "findings": findings}))
        assert _health(status)[0] == plain
        done = subprocess.run([sys.executable, "-m", "rlrecipes", "healthcheck", "--status", str(status),
                               "--ignore", "run-stalled"], capture_output=True, text=True,
                              env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=60)
        assert done.returncode == ignoring, done.stdout + done.stderr


def test_healthcheck_ignore_takes_only_a_code_something_else_acts_on(tmp_path):
    done = subprocess.run([sys.executable, "-m", "rlrecipes", "healthcheck", "--status", str(tmp_path / "s.json"),
                           "--ignore", "run-staled"], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=60)
    assert done.returncode == 2 and "run-staled" in done.stderr and "Traceback" not in done.stderr, done.stderr


# What vLLM 0.24 logged on an H200 when its engine process was killed during verl 0.9.1's weight sync (then
# verl waited on it for good): docs/bench/gpu-data/recovery-faults-hopper/attempt-1.log.
ENGINE_DEAD = ("\x1b[36m(vLLMHttpServer pid=3265)\x1b[0m ERROR 12-04 13:10:59 [async_llm.py:704] "
               "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) "
               "for the root cause.")


def _console(path: Path, steps: range, tail: list[str] = ()) -> None:
    with open(path, "a") as fh:
        for step in steps:
            fh.write(f"(TaskRunnerV1 pid=7) step:{step} - timing_s/step:8.0\n")
        for line in tail:
            fh.write(line + "\n")


def test_a_dead_rollout_engine_is_a_stall_at_once_until_a_relaunch_logs(tmp_path):
    now = time.time()
    first = tmp_path / "console-20260101T000000Z.log"
    _console(first, range(1, 6))
    progress = Progress([tmp_path])  # the derived limit: at least STALL_FLOOR_S
    progress.update(now)
    assert progress.verdict(now + 30)[0] is False
    # The engine dies mid-run: stalled at the next pass, long before any limit.
    _console(first, range(0), ["(TaskRunnerV1 pid=7) Saving checkpoint", ENGINE_DEAD, "Traceback ..."])
    progress.update(now + 40)
    stalled, message, facts = progress.verdict(now + 45)
    assert stalled and "rollout engine died 5s ago, after step 5" in message, message
    assert facts["quiet_s"] < facts["limit_s"] and facts["dead_engine"]["at"] == now + 40
    # A dead-engine line from before a later step of the same launch is history, not a stall.
    other = tmp_path / "run2" / "console-20260101T000000Z.log"
    other.parent.mkdir()
    _console(other, range(1, 3), [ENGINE_DEAD])
    _console(other, range(3, 4))
    later = Progress([tmp_path / "run2"])
    later.update(now)
    assert later.verdict(now + 5)[0] is False and later.verdict(now + 5)[2]["dead_engine"] is None
    # The relaunch opens a log of its own: the old launch's death no longer counts while it loads its model.
    relaunch = tmp_path / "console-20260101T000500Z.log"
    relaunch.write_text("(TaskRunnerV1 pid=9) loading\n")
    os.utime(relaunch, (now + 55, now + 55))  # this test's clock runs ahead of the filesystem's
    progress.update(now + 60)
    stalled, _, facts = progress.verdict(now + 70)
    assert not stalled and facts["dead_engine"] is None


def test_what_verls_pruning_leaves_is_no_save_in_flight_and_hides_no_stall(tmp_path):
    """On an H200 (docs/bench/gpu-reliability.md, the vLLM engine killed) verl removed `actor/` of the save before
    at every save, which touches that step's directory: the watchdog took it for a save in flight for the grace
    period after every save, and a stall in that window went unreported. A step above the newest whole one is
    still a save, and still progress."""
    from rlrecipes.watchdog import Watchdog, WatchdogConfig
    from rlrecipes.watchdog.policy import Retention
    from rlrecipes.watchdog.simulate import save_checkpoint

    root, logs = tmp_path / "ckpt", tmp_path / "logs"
    exp = root / "canary-grpo-lora"
    for step in (35, 40):
        save_checkpoint(exp, step)
    shutil.rmtree(exp / "global_step_35" / "actor")  # verl's pruning at the save of step 40, just now
    logs.mkdir()
    _console(logs / "console-20260101T000000Z.log", range(1, 41), [ENGINE_DEAD])
    dog = Watchdog(WatchdogConfig(root=root, retention=Retention(2, None, 300.0), interval_s=None, progress=[logs]))
    status = dog.run_once()
    assert {s["step"]: s["state"] for s in status["experiments"][0]["steps"]} == {35: "writing", 40: "complete"}
    assert status["progress"]["saving"] is False
    assert "run-stalled" in [f["code"] for f in status["findings"]], status["findings"]
    # A save of step 45 being written (no tracker yet) is a save in flight: progress, no stall while it lasts.
    save_checkpoint(exp, 45, tracker=False)
    status = dog.run_once()
    assert status["progress"]["saving"] is True
    assert "run-stalled" not in [f["code"] for f in status["findings"]], status["findings"]


def test_the_stop_guard_acts_at_once_on_an_engine_that_died_in_its_own_launch(tmp_path):
    from rlrecipes.verl.stopguard import watchdog_says_stalled

    status = tmp_path / "status.json"
    now = time.time()

    def say(dead_at):
        status.write_text(json.dumps({
            "time": now, "interval_s": 30,
            "progress": {"limit_s": 900.0, "dead_engine": {"at": dead_at, "file": "console-x.log", "line": "..."}},
            "findings": [{"code": "run-stalled", "message": "the rollout engine died"}]}))

    say(now - 10)
    assert watchdog_says_stalled(status, now, started=now - 300) == "the rollout engine died"
    say(now - 400)  # died before this guard started: the launch before it; the relaunch gets its whole limit
    assert watchdog_says_stalled(status, now, started=now - 300) is None


def test_a_guarded_trainer_whose_engine_died_is_relaunched_within_seconds_not_the_stall_floor(tmp_path):
    """The watchdog as compose runs it (no --stall-after: the limit is at least STALL_FLOOR_S = 15 minutes), and a
    stand-in trainer that logs steps, then vLLM's EngineDeadError, then hangs as verl 0.9.1 did: the guard
    stops it and exits 75 (the relaunch) within seconds."""
    from rlrecipes.verl.stopguard import EXIT_STALLED

    trainer = HANGING_TRAINER.replace("ERROR rollout engine: CUDA error: an illegal memory access",
                                      ENGINE_DEAD.replace("\x1b", "\\x1b"))
    assert "EngineDeadError" in trainer
    guard, took = _guarded_beside_the_watchdog(tmp_path, trainer)  # no --stall-after: the derived limit
    assert guard.returncode == EXIT_STALLED, guard.stderr[-2000:]
    assert "the rollout engine died" in guard.stderr and "EngineDeadError" in guard.stderr
    assert took < 60 < STALL_FLOOR_S


def test_the_recorded_runs_read_as_they_went(tmp_path):
    """The console logs of the runs whose vLLM engine was killed read as a dead engine, and in the later ones
    the relaunch's log clears it; none of the other recorded GPU runs' console logs reads as one (they finished,
    or were stopped by a signal)."""
    records = REPO / "docs" / "bench" / "gpu-data"
    killed = records / "recovery-faults-hopper" / "logs" / "console-20261204T130705Z.log"
    progress = Progress([killed])
    progress.update(killed.stat().st_mtime)
    stalled, message, facts = progress.verdict(killed.stat().st_mtime + 1)
    assert stalled and "after step 0" in message and "EngineDeadError" in facts["dead_engine"]["line"]
    # The later sitting: killed after the save of step 5; the relaunch logged its own file 27 s after the
    # kill (vLLM's line at 16:05:21, the file stamped 16:05:48) and trained on to step 47. A clone dates both
    # files alike, so they get their recorded times back here.
    second = records / "recovery-faults-hopper-2" / "logs"
    first, relaunch = second / "console-20261204T155905Z.log", second / "console-20261204T160548Z.log"
    at = 1_800_000_000.0
    for log, when in ((first, at), (relaunch, at + 27)):
        shutil.copy(log, tmp_path / log.name)
        os.utime(tmp_path / log.name, (when, when))
    alone = Progress([tmp_path / first.name])
    alone.update(at)
    stalled, message, facts = alone.verdict(at + 1)
    assert stalled and "after step 4" in message and "EngineDeadError" in facts["dead_engine"]["line"]
    both = Progress([tmp_path])
    both.update(at + 30)
    stalled, _, facts = both.verdict(at + 31)
    assert not stalled and facts["dead_engine"] is None and facts["step"] == 47
    # The fifth and sixth sittings (seeds 1 and 0, one H100 each): killed after the save of step 30, the
    # relaunch's file 32 s later
    killed_30s = []
    for sitting, stamps in (("recovery-faults-hopper-4", ("20261206T052425Z", "20261206T053358Z")),
                            ("recovery-faults-hopper-5", ("20261206T080741Z", "20261206T081714Z"))):
        logs = records / sitting / "logs"
        killed_30, relaunch_30 = (logs / f"console-{stamp}.log" for stamp in stamps)
        killed_30s.append(killed_30)
        (tmp_path / sitting).mkdir()
        for log, when in ((killed_30, at), (relaunch_30, at + 32)):
            shutil.copy(log, tmp_path / sitting / log.name)
            os.utime(tmp_path / sitting / log.name, (when, when))
        alone = Progress([tmp_path / sitting / killed_30.name])
        alone.update(at)
        stalled, message, facts = alone.verdict(at + 1)
        assert stalled and "after step 29" in message and "EngineDeadError" in facts["dead_engine"]["line"], sitting
        both = Progress([tmp_path / sitting])
        both.update(at + 35)
        stalled, _, facts = both.verdict(at + 36)
        assert not stalled and facts["dead_engine"] is None and facts["step"] == 60, sitting
    others = sorted(p for p in records.rglob("console-*.log") if p not in (killed, first, *killed_30s))
    assert len(others) >= 11
    for log in others:
        progress = Progress([log])
        progress.update(log.stat().st_mtime)
        assert progress.dead_engine() is None, log

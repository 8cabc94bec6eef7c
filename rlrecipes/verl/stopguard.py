"""Graceful stop for a verl run: SIGTERM waits for a checkpoint save in flight, then reaches verl.

    python3 -m rlrecipes.verl.stopguard --ckpt-dir DIR [--wait S] -- python3 -m verl.trainer.main_ppo ...

The generated launchers `exec` this (recipes/*.sh), so it is the process `docker stop`, a RunPod stop or Slurm
signal (through tini, PID 1 of the images). It starts verl as its child and, on SIGTERM or SIGINT:

- no save in flight: stops verl at once;
- a save in flight (a `global_step_N` above the tracker, written to within the last --quiet seconds): waits
  until verl's tracker names that step (verl writes it last, so the save is whole) or --wait seconds pass,
  then stops verl.

SIGINT and SIGHUP too (Ctrl-C, a closed terminal). verl runs in a process group of its own
(rlrecipes/process.py), so a terminal's Ctrl-C reaches it only through this guard. Whatever the signal,
verl is stopped with SIGTERM: Ray's driver exits on SIGTERM (its handler raises SystemExit, and ray.shutdown at
exit takes the workers and the vLLM server with it), while a SIGINT left a driver waiting in ray.get running.
Ray's native failure handler, which would catch that SIGTERM first and print a stack trace (or abort), is
turned off for verl's processes (RAY_DISABLE_FAILURE_SIGNAL_HANDLER=1, unless set otherwise).

verl itself has no SIGTERM handler that finishes a save: a save cut there stays half-written -- but never
named by the tracker. The guard only buys the save its time; the container's stop timeout must be longer than
--wait (compose.yaml: stop_grace_period 2m; `docker stop -t`). Exit status: verl's; 128 + the signal this guard
received when it stopped verl (143 SIGTERM, 130 SIGINT, 129 SIGHUP), whatever verl then exited with; 75 when it
stopped a stalled run.

Stdlib only: it runs in every image, before and without anything else of rlrecipes.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rlrecipes.process import shell_status, spawn
from rlrecipes.verl.checkpoints import STEP_DIR_RE, read_tracker

DEFAULT_WAIT_S = 100.0  # compose.yaml gives 120 s (stop_grace_period: 2m); leave verl time to exit
DEFAULT_QUIET_S = 30.0  # a step dir untouched for this long is not being written (an old interrupted save)


def newest_mtime(path: Path) -> float:
    newest = 0.0
    for base, dirs, files in os.walk(path):
        for name in (base, *(os.path.join(base, f) for f in files)):
            try:
                newest = max(newest, os.lstat(name).st_mtime)
            except OSError:
                continue
    return newest


def save_in_flight(ckpt_dir: Path, now: float, quiet_s: float = DEFAULT_QUIET_S) -> int | None:
    """The step verl is saving now: the newest step dir above the tracker written to within `quiet_s`."""
    tracker = read_tracker(ckpt_dir)
    floor = tracker.step if tracker.status == "ok" else -1
    try:
        entries = list(os.scandir(ckpt_dir))
    except OSError:
        return None
    steps = sorted((int(m.group(1)), Path(e.path)) for e in entries
                   if e.is_dir(follow_symlinks=False) and (m := STEP_DIR_RE.match(e.name)))
    for step, path in reversed(steps):
        if step <= floor:
            return None
        if now - newest_mtime(path) < quiet_s:
            return step
    return None


def saved(ckpt_dir: Path, step: int) -> bool:
    tracker = read_tracker(ckpt_dir)
    return tracker.status == "ok" and tracker.step is not None and tracker.step >= step


def log(message: str) -> None:
    print(f"[stopguard] {message}", file=sys.stderr, flush=True)


EXIT_STALLED = 75  # EX_TEMPFAIL: stopped because the run stalled; the stage engine (launch/stages.py) relaunches on it
STALL_POLL_S = 10.0


def fresh_status(status_file: Path | None, now: float) -> dict | None:
    """The watchdog's status file when it is fresh (written within three of its intervals and 30 s), else None
    (none, unreadable, malformed or stale)."""
    if status_file is None:
        return None
    try:
        status = json.loads(status_file.read_text(encoding="utf-8"))
        interval = float(status.get("interval_s") or 60.0)
        if not now - float(status["time"]) <= 3 * interval + 30:  # NaN and stale both fail
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    return status


def watchdog_says_stalled(status_file: Path | None, now: float, started: float | None = None) -> str | None:
    """The watchdog's `run-stalled` message when its status file is fresh and carries one, else None.

    `started`: when this guard started. Until the stall limit has passed since then, a `run-stalled` finding
    describes the launch before it (the watchdog clears it only once the relaunch logs a step, after its
    model loading), so a relaunch gets the whole limit of its own instead of being stopped at once -- unless the
    finding is a rollout engine that died since this guard started: that one is acted on at once."""
    status = fresh_status(status_file, now)
    if status is None:
        return None
    try:
        progress = status.get("progress") or {}
        dead_at = (progress.get("dead_engine") or {}).get("at")
        this_launch = isinstance(dead_at, (int, float)) and started is not None and dead_at >= started
        if started is not None and not this_launch:
            limit = float(progress.get("limit_s") or 0.0)
            if not now - started >= limit:  # NaN: not acted on
                return None
        for finding in status.get("findings", []):
            if isinstance(finding, dict) and finding.get("code") == "run-stalled":
                return str(finding.get("message"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    return None


def run(command: list[str], ckpt_dir: Path, wait_s: float, quiet_s: float, poll_s: float = 0.5,
        stall_status: Path | None = None, stall_poll_s: float | None = None) -> int:
    if stall_poll_s is None:
        stall_poll_s = STALL_POLL_S  # read at call time, so a test can shorten it
    started = time.time()
    # Ray's native failure handler catches SIGTERM in verl's driver and prints a stack trace (then, on a GPU
    # host, aborts: exit 134) instead of letting Ray's own Python handler exit and shut the cluster down
    # (ray.shutdown at exit: the workers and vLLM go, the GPU is freed). An explicit setting is kept.
    env = {**os.environ}
    env.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    pending: list[int] = []
    stalled = False
    next_stall_check = time.monotonic() + stall_poll_s

    def on_signal(signum, _frame):
        pending.append(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # before verl starts: no stop is lost meanwhile
        signal.signal(sig, on_signal)
    child = spawn(command, env)  # its own process group: a terminal's Ctrl-C reaches verl through this guard only
    forwarded = 0  # signals passed on to verl
    deadline = None
    step = None
    while True:
        try:
            code = child.wait(timeout=poll_s)
            break
        except subprocess.TimeoutExpired:
            pass
        if not pending and stall_status is not None and time.monotonic() >= next_stall_check:
            next_stall_check = time.monotonic() + stall_poll_s
            message = watchdog_says_stalled(stall_status, time.time(), started)
            if message:
                # Alive but training nothing (e.g. hung in its rollout engine): stop it like `docker stop`
                # would, and exit EXIT_STALLED so the image's `run` stage relaunches it; it resumes from the
                # last whole checkpoint.
                log(f"the watchdog reports the run stalled ({message}); stopping verl so it can be restarted")
                stalled = True
                pending.append(signal.SIGTERM)
        if pending and not forwarded:
            if deadline is None:
                deadline = time.monotonic() + wait_s
                step = save_in_flight(ckpt_dir, time.time(), quiet_s)
                name = signal.Signals(pending[0]).name
                if step is None:
                    log(f"{name}: no checkpoint save in flight under {ckpt_dir}; stopping verl")
                else:
                    log(f"{name}: checkpoint global_step_{step} is being saved; letting it finish "
                        f"(at most {wait_s:.0f} s)")
            if step is None or saved(ckpt_dir, step) or time.monotonic() >= deadline:
                if step is not None:
                    log(f"global_step_{step} saved" if saved(ckpt_dir, step)
                        else f"global_step_{step} not finished after {wait_s:.0f} s; stopping verl anyway "
                             "(the tracker still names the last whole checkpoint)")
                child.send_signal(signal.SIGTERM)
                forwarded = 1
        elif forwarded and len(pending) > forwarded:
            # A second signal (a second Ctrl-C, `docker kill -s TERM`) goes straight through.
            child.send_signal(signal.SIGTERM)
            forwarded += 1
    if stalled:
        return EXIT_STALLED
    if forwarded:  # stopped: not finished, whatever verl's own exit status says
        return 128 + pending[0]
    return shell_status(code)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m rlrecipes.verl.stopguard", description=__doc__.split("\n\n")[0])
    parser.add_argument("--ckpt-dir", type=Path, required=True, help="trainer.default_local_dir of the run")
    parser.add_argument("--wait", type=float, default=float(os.environ.get("RLRECIPES_STOP_WAIT", DEFAULT_WAIT_S)),
                        metavar="S", help=f"longest wait for a save in flight (default {DEFAULT_WAIT_S:.0f}, "
                                          "env RLRECIPES_STOP_WAIT)")
    parser.add_argument("--quiet", type=float, default=DEFAULT_QUIET_S, metavar="S",
                        help=f"a step dir untouched this long is not being saved (default {DEFAULT_QUIET_S:.0f})")
    stall = os.environ.get("RLRECIPES_STALL_STATUS")
    parser.add_argument("--stall-status", type=Path, default=Path(stall) if stall else None, metavar="FILE",
                        help="the watchdog's status file (run with --progress): when it reports run-stalled, stop "
                             f"verl and exit {EXIT_STALLED}; the image's run stage relaunches it (env "
                             "RLRECIPES_STALL_STATUS; off by default)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the verl command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")
    if not (args.wait >= 0 and args.quiet > 0):
        parser.error("--wait must be >= 0 and --quiet > 0 (seconds)")
    return run(command, args.ckpt_dir, args.wait, args.quiet, stall_status=args.stall_status)


if __name__ == "__main__":
    raise SystemExit(main())

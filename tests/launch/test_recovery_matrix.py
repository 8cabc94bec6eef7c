"""The recovery matrix (issue 34, deliverable 4): a user's command, stopped anywhere, then run again as it was
typed, goes on -- on the recipe's default profile and on another one.

Each case runs the real `make` target with the real entry point on a GPU host simulated on this CPU machine
(tests/support/recovery.py): the image's shell (RLRECIPES_IN_IMAGE=1, as on RunPod or inside a container), a
stand-in `nvidia-smi` showing one H200 (so require-gpu.sh and preflight pass), the stand-in verl trainer
(tests/fixtures/standin_verl: verl's checkpoint layout, the tracker written last, dies at once on SIGTERM as
verl does, can be paused at a step or mid-save and told to hang), the real filesystem. Case id:
COMMAND-PROFILE-STOPPED_IN-FAULT, e.g. `reproduce-other_profile-train_mid_save-SIGKILL`.

Recipe: smoke-grpo-lora, the cheapest with offline assets and more than one profile: `any-1gpu` (its own,
verl 0.5.0) and `any-1gpu-hopper` (verl 0.9.1; PROFILE=any-1gpu-hopper, the issue's failing path). Each case's
commands run in an interpreter of the profile's verl version, as they would in that profile's image.

Each case: (1) start the command, stop it at the named moment; (2) check how the first run ended; (3) run the
same command, in the same environment, again: it must exit 0, redo nothing that was done, and leave no
checkpoint or output lost or half-written.

The faults:
- SIGTERM: sent to the command's whole process group, as Ctrl-C (SIGINT), a closed terminal (SIGHUP), `kill
  -TERM -PGID` or a supervisor reach a command run in a shell: every process of the run gets it at once,
  the trainer too (`docker stop`, which signals PID 1 only, is the compose cases'). Expected (issue 34,
  deliverable 3): make ends as terminated (143), nothing of the run is left running, a save in flight
  finishes (its step whole and named by the tracker), and reproduce.json records the stage as `interrupted`
  -- the train stage with `checkpoint`: the step of the last whole checkpoint (null before the first).
- SIGKILL: `kill -9` of the whole process group; nothing can react. The tracker never names a cut save.
- stall: the trainer hangs after step 2 (alive, training nothing, STANDIN_HANG_AT) and the watchdog's status
  file (RLRECIPES_STALL_STATUS, written here as the watchdog writes it) reports run-stalled: the stop guard
  exits 75 and the run relaunches itself from the last whole checkpoint and finishes; the first command
  then exits 0.

Where it is stopped (a deterministic moment, never a sleep):
- assets: the recipe's offline assets being built, data written, model not yet (reproduce only);
- preflight: the stand-in nvidia-smi, called under `preflight`, pauses (trainer never launched);
- train_mid_step: at the start of step 3, checkpoints 1 and 2 whole;
- train_mid_save: halfway through the save of step 3 (its files half-written), checkpoints 1 and 2 whole;
- merge, eval, report: the stage recorded `running` in reproduce.json (reproduce only).
One case more runs a seed (`make reproduce ... SEED=2`, id suffix `-seed2`): no assets copied in, the first run
builds them from the seed into its seed-2/ folders; the same command then goes on there, and nothing is written
to the unseeded folders.
"Nothing redone": the assets are never rebuilt once built (inode and mtime of every file), reproduce's finished
stages are not run again (their entries in reproduce.json stay as they were), training resumes from the last
whole checkpoint (the stand-in records the step each launch resumed from), the merged model and eval are not
redone once finished. "Nothing lost": every step the tracker ever named is whole (the real verl checkpoint the
stand-in copies, byte for byte), the tracker ends at the last step, and reproduce's outputs are all there
(merged model, eval summary, report, expect.json met).

Combinations that do not exist, and why:
- train and resume have no merge, eval or report stage; resume has no data stage, and train's data/model
  stages skip what exists (an offline recipe's assets come from `rlrecipes smoke-assets`, which is
  reproduce's first stage): their "assets or data" stop is reproduce's.
- A stall is a hung trainer: only in train, and only mid-step (a hang mid-save is the watchdog's disk
  fault, tests/watchdog).
- compose (`docker compose up` after `docker compose stop`) needs the private Docker daemon and the stand-in
  images: a few cases in the "docker" xdist group (test_compose_*), not the product.

Merge and eval run for real (the real checkpoint files, `rlrecipes merge` with verl's model_merger, the fast
eval on the 64 held-out problems) rather than through a hook: they are CPU work of seconds on this tiny model,
and a stop in them is only worth testing if the stage does what it does for a user (a merge replaces its output
atomically, or not).

Product behaviours this test assumes where the issue leaves them open: a stop in preflight or in the assets
stage is recorded `interrupted` like any other stage; the train stage's `checkpoint` is null before the first
checkpoint; a rerun of a finished reproduce exits with the stored verdict (0 here: the stand-in's logged
metrics meet the recipe's expect: block) without running a stage; a rerun of a finished train/resume launches
the trainer, which finds nothing left to train and exits 0.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.recovery import RECIPE, Host, prepare_base, stop_group, tree_state, wait_exit, wait_group_gone

pytestmark = [pytest.mark.slow, pytest.mark.verl]

PROFILES = {"default_profile": None, "other_profile": "any-1gpu-hopper"}
VERL = {"default_profile": "0.5.0", "other_profile": "0.9.1"}
STEPS = 4  # the recipe's trainer.total_training_steps
STAGE_OF = {"assets": "assets", "preflight": "train", "train_mid_step": "train", "train_mid_save": "train",
            "merge": "merge", "eval": "eval", "report": "report"}
REPRODUCE_STAGES = ["assets", "train", "merge", "eval", "report", "expect"]
TIMEOUT = 240


@dataclass(frozen=True)
class Case:
    command: str
    profile: str
    where: str
    fault: str
    seed: int | None = None  # `make reproduce SEED=N`: assets built from it, the run in seed-N/ folders

    @property
    def id(self) -> str:
        return f"{self.command}-{self.profile}-{self.where}-{self.fault}" + (f"-seed{self.seed}" if self.seed else "")


def cases() -> list[Case]:
    found = []
    for command in ("train", "resume", "reproduce"):
        wheres = ["preflight", "train_mid_step", "train_mid_save"]
        if command == "reproduce":
            wheres = ["assets", *wheres, "merge", "eval", "report"]
        for profile in PROFILES:
            for where in wheres:
                for fault in ("SIGTERM", "SIGKILL"):
                    found.append(Case(command, profile, where, fault))
            found.append(Case(command, profile, "train_mid_step", "stall"))
    found.append(Case("reproduce", "other_profile", "train_mid_step", "SIGTERM", seed=2))
    return found


# `make test` runs these: every command on both profiles, every stage a run can be stopped in, every fault, the
# finished run's third command (train_mid_step-SIGTERM) on both profiles -- about a quarter of the product's time.
# RLRECIPES_RECOVERY_FULL=1 runs all of it (docs/reliability.md has the last full run: 58 passed).
DEFAULT = {
    "train-other_profile-train_mid_step-SIGTERM", "train-default_profile-train_mid_save-SIGTERM",
    "resume-other_profile-train_mid_save-SIGKILL", "resume-other_profile-train_mid_step-stall",
    "resume-default_profile-preflight-SIGTERM", "train-default_profile-train_mid_step-stall",
    "reproduce-default_profile-assets-SIGTERM", "reproduce-other_profile-preflight-SIGKILL",
    "reproduce-other_profile-train_mid_save-SIGTERM", "reproduce-default_profile-train_mid_step-SIGTERM",
    "reproduce-other_profile-merge-SIGTERM", "reproduce-default_profile-eval-SIGKILL",
    "reproduce-other_profile-report-SIGTERM", "reproduce-other_profile-train_mid_step-SIGTERM-seed2",
}
CASES = [c for c in cases() if c.id in DEFAULT or os.environ.get("RLRECIPES_RECOVERY_FULL") == "1"]


@pytest.fixture
def base(tmp_path_factory, verl_python):
    """The prepared workspace all cases copy: built by the first case that needs it (a file lock shares it
    between xdist workers), so no fixture outlives a test and the cases spread over the workers."""
    root = tmp_path_factory.getbasetemp()
    shared = root.parent if root.name.startswith("popen-gw") else root
    return prepare_base(shared / "recovery-matrix-base", {v: verl_python(v) for v in ("0.5.0", "0.9.1")})


def host_for(case: Case, tmp_path: Path, base: Path, verl_python) -> Host:
    host = Host(tmp_path / "host", VERL[case.profile], verl_python(VERL[case.profile]), PROFILES[case.profile],
                seed=case.seed)
    if case.where in ("train_mid_step", "train_mid_save"):
        host.extra_env["STANDIN_PAUSE_AT"] = f"{'step' if case.where == 'train_mid_step' else 'save'}:3"
    if case.where == "preflight":
        host.extra_env["MATRIX_PREFLIGHT_MARK"] = str(host.preflight_mark)
    if case.fault == "stall":
        host.extra_env.pop("STANDIN_PAUSE_AT", None)
        host.extra_env.update(STANDIN_HANG_AT="2", RLRECIPES_STALL_STATUS=str(host.stall_status))
    host.setup(base, with_assets=case.where != "assets" and case.seed is None)  # a seed builds its own
    return host


def fail(case: Case, what: str, run=None) -> None:
    raise AssertionError(f"[{case.id}] {what}" + (f"\n--- output of {' '.join(run.argv)} ---\n{run.output()}"
                                                  if run is not None else ""))


def wait_for(case: Case, run, reached, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not reached():
        if run.proc.poll() is not None:
            fail(case, f"the run ended (exit {run.proc.returncode}) before {what}", run)
        if time.monotonic() > deadline:
            stop_group(run, signal.SIGKILL)
            fail(case, f"{what} not reached in {timeout:.0f} s", run)
        time.sleep(0.02)


def stop_point(case: Case, host: Host):
    """A callable: True once the run is where the case stops it."""
    if case.where == "assets":
        return lambda: (host.data / "smoke-gsm8k" / "manifest.json").exists() \
            and not (host.models / "smoke-tiny" / "manifest.json").exists()
    if case.where == "preflight":
        return host.preflight_mark.exists
    if case.where in ("train_mid_step", "train_mid_save"):
        return host.pause_mark.exists
    return lambda: host.state().get("stages", {}).get(case.where, {}).get("status") == "running"


def report_stall_while_hung(case: Case, host: Host, run) -> None:
    """Play the watchdog: once the trainer hangs, report run-stalled in its status file; once a relaunch
    resumes, report a healthy run again."""
    wait_for(case, run, lambda: any("hung" in e for launch in host.launches() for e in launch["events"]),
             "the trainer hanging")
    host.stall_status.parent.mkdir(parents=True, exist_ok=True)
    status = {"time": time.time(), "interval_s": 1.0, "progress": {"limit_s": 1.0},
              "findings": [{"code": "run-stalled", "message": "no step logged for 600 s (test)"}]}
    host.stall_status.write_text(json.dumps(status))
    wait_for(case, run, lambda: len(host.launches()) >= 2, "the relaunch after the stall", timeout=90)
    host.stall_status.write_text(json.dumps({**status, "time": time.time(), "findings": []}))


def expected_resume(case: Case) -> int | None:
    """The checkpoint the next launch must resume from."""
    if case.where == "train_mid_step" or case.fault == "stall":
        return 2
    if case.where == "train_mid_save":
        return 3 if case.fault == "SIGTERM" else 2  # a clean stop lets the save in flight finish
    return None


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_stopped_then_the_same_command_goes_on(case, tmp_path, base, verl_python):
    timings = {}
    host = host_for(case, tmp_path, base, verl_python)
    assets = (host.models / "smoke-tiny", host.data / "smoke-gsm8k")
    assets_before = {} if case.where == "assets" or case.seed is not None else {d: tree_state(d) for d in assets}

    # (1) the command, stopped at the named moment
    started = time.monotonic()
    first = host.start(case.command)
    if case.fault == "stall":
        report_stall_while_hung(case, host, first)
        code = wait_exit(first, TIMEOUT)
    else:
        wait_for(case, first, stop_point(case, host), f"the stop point ({case.where})")
        if case.where == "assets":
            assets_before = {assets[1]: tree_state(assets[1])}  # the data is built; the model is being built
        elif case.seed is not None:
            assets_before = {d: tree_state(d) for d in assets}  # the first run built them, from the seed
        stop_group(first, getattr(signal, case.fault))
        code = wait_exit(first, TIMEOUT)
    timings["first"] = time.monotonic() - started
    if not wait_group_gone(first, 30):
        fail(case, "processes of the stopped run are still running 30 s after make exited", first)
    tracker_after_stop = host.tracker()
    state_after_stop = host.state()
    launches_after_stop = host.launches()

    # (2) how the first run ended
    if case.fault == "stall":
        if code != 0:
            fail(case, f"the stalled run did not relaunch itself and finish: make exited {code}", first)
        resumed = [launch.get("resumed_from") for launch in launches_after_stop]
        if resumed != [None, 2]:
            fail(case, f"launches resumed from {resumed}, expected [None, 2] (hung after step 2)", first)
    elif case.fault == "SIGKILL":
        if code != -signal.SIGKILL:
            fail(case, f"make ended with {code} after SIGKILL", first)
    else:
        # make, signalled itself, ends on its own terms (dies of it, or exits 2 with "Terminated", "Error 143" or
        # "wait: No child processes"); the stage must have ended as stopped and said where the same command
        # goes on: `[rlrecipes] train stopped by SIGTERM (exit 143)...`, `[reproduce] merge stopped by ...`
        if code not in (-signal.SIGTERM, 128 + signal.SIGTERM, 2):
            fail(case, f"make ended with {code} after SIGTERM", first)
        if not re.search(r"stopped by SIGTERM \(exit 143\)[^\n]*the same command goes on", first.output()):
            fail(case, "no line saying the stage stopped by SIGTERM (exit 143) and where the same command goes on",
                 first)
        if case.where == "train_mid_save" and not (tracker_after_stop == 3 and host.whole(3)):
            fail(case, f"the save in flight did not finish on SIGTERM: tracker {tracker_after_stop}, "
                       f"global_step_3 whole: {host.whole(3)}", first)
        if case.command == "reproduce":
            stage = state_after_stop.get("stages", {}).get(STAGE_OF[case.where], {})
            if stage.get("status") != "interrupted":
                fail(case, f"reproduce.json records the {STAGE_OF[case.where]} stage as {stage!r}, expected "
                           "status 'interrupted'", first)
            if STAGE_OF[case.where] == "train" and ("checkpoint" not in stage
                                                    or stage["checkpoint"] != tracker_after_stop):
                fail(case, f"reproduce.json's train stage {stage!r}: expected checkpoint {tracker_after_stop} "
                           "(the last whole checkpoint)", first)
    if tracker_after_stop is not None and not host.whole(tracker_after_stop):
        fail(case, f"the tracker names global_step_{tracker_after_stop}, which is not whole", first)
    done_before = {name: info for name, info in state_after_stop.get("stages", {}).items()
                   if info.get("status") == "done"}

    # (3) the same command again
    started = time.monotonic()
    second = host.start(case.command)
    code = wait_exit(second, TIMEOUT)
    timings["second"] = time.monotonic() - started
    if code != 0:
        fail(case, f"the same command, run again, exited {code}", second)
    check_nothing_redone(case, host, second, assets_before, launches_after_stop, done_before)
    check_nothing_lost(case, host, second)

    # a finished run's same command must not fail either (default and another profile, every command)
    if case.where == "train_mid_step" and case.fault == "SIGTERM":
        state_done, launches_done = host.state(), host.launches()
        started = time.monotonic()
        third = host.start(case.command)
        code = wait_exit(third, TIMEOUT)
        timings["third"] = time.monotonic() - started
        if code != 0:
            fail(case, f"the same command after the run finished exited {code}", third)
        if case.command == "reproduce" and host.state() != state_done:
            fail(case, "a finished reproduce ran stages again", third)
        if any(launch.get("resumed_from") != STEPS for launch in host.launches()[len(launches_done):]):
            fail(case, "a finished run trained again", third)
        check_nothing_lost(case, host, third)
    if case.seed is not None:
        check_seed_kept_apart(case, host, second)
    print(f"[{case.id}] " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))


def check_nothing_redone(case: Case, host: Host, run, assets_before, launches_before, done_before) -> None:
    for directory, before in assets_before.items():
        if tree_state(directory) != before:
            fail(case, f"{directory} was rebuilt or rewritten", run)
    if case.command == "reproduce":
        stages = host.state().get("stages", {})
        changed = [name for name, info in done_before.items() if stages.get(name) != info]
        if changed:
            fail(case, f"finished stages ran again: {changed}", run)
    launches = host.launches()
    new = launches[len(launches_before):]
    if case.where in ("merge", "eval", "report"):
        if new:
            fail(case, f"training ran again after it had finished: {len(new)} new launch(es)", run)
        return
    want = expected_resume(case)
    if case.fault == "stall":
        if case.command == "reproduce":  # the first run finished: its rerun skips every stage
            if new:
                fail(case, f"a finished reproduce trained again: {len(new)} new launch(es)", run)
            return
        want = STEPS  # the first run finished
    if not new:
        fail(case, "the trainer was never launched again", run)
    if new[0].get("resumed_from") != want:
        fail(case, f"training went on from {new[0].get('resumed_from')}, expected {want} (the last whole "
                   "checkpoint)", run)


def check_seed_kept_apart(case: Case, host: Host, run) -> None:
    """A seed's run built its assets from the seed and wrote nothing into the unseeded folders."""
    built = json.loads((host.data / "smoke-gsm8k" / "manifest.json").read_text())
    if f"seed {case.seed}" not in json.dumps(built):
        fail(case, f"the seed's data was not built from seed {case.seed}: {built}", run)
    outside = [str(p) for p in (host.ws / "checkpoints" / RECIPE, host.ws / "logs" / RECIPE,
                                host.ws / "models" / "smoke-tiny", host.ws / "reports" / RECIPE) if p.exists()]
    if outside:
        fail(case, f"a seeded run wrote outside its seed-{case.seed}/ folders: {outside}", run)


def check_nothing_lost(case: Case, host: Host, run) -> None:
    named = sorted({e["saved"] for launch in host.launches() for e in launch["events"] if "saved" in e})
    broken = [step for step in named if not host.whole(step)]
    if broken:
        fail(case, f"checkpoints the tracker named are not whole: {broken}", run)
    if host.tracker() != STEPS or not host.whole(STEPS):
        fail(case, f"the run did not end with a whole step-{STEPS} checkpoint (tracker {host.tracker()})", run)
    if case.command == "reproduce":
        stages = host.state().get("stages", {})
        unfinished = [s for s in REPRODUCE_STAGES if stages.get(s, {}).get("status") != "done"]
        if unfinished:
            fail(case, f"reproduce stages not done: {unfinished}", run)
        merged = host.models / f"{RECIPE}-merged"
        missing = [str(p) for p in (merged / "config.json", merged / "model.safetensors",
                                    merged / "eval" / "eval-summary.json", host.reports / RECIPE / "report.html",
                                    host.logs / "expect.json") if not p.is_file()]
        if missing:
            fail(case, f"outputs missing: {missing}", run)
        verdict = json.loads((host.logs / "expect.json").read_text()).get("status")
        if verdict != "met":
            fail(case, f"expect.json says {verdict!r}, not 'met'", run)

"""verl's resume tracker: the state of every step directory, whether the tracker can be trusted, its repair.

Pure rules (`classify`) over a snapshot read by checkpoints.py (scan_root), and the two side effects they
call for: `write_tracker` (atomic) and `resume_check` (every experiment under a root, before a launch and
from the watchdog's passes). The watchdog's retention and budget decisions (rlrecipes/watchdog/policy.py)
build on these states; preflight reads `resume_check` to refuse a launch that would restart at step 0.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

from rlrecipes.fsutil import atomic_write_text
from rlrecipes.verl.checkpoints import TRACKER_NAME, Experiment, StepDir, ZipCache, scan_root, tracker_note_path

log = logging.getLogger("rlrecipes.watchdog")

# Step states (also the `state` label of the metrics).
COMPLETE = "complete"  # whole, at or below the tracker: resumable
WRITING = "writing"  # written to within the grace period: never touched
INTERRUPTED = "interrupted"  # above the tracker and quiet: a save that died
INCOMPLETE = "incomplete"  # at or below the tracker but not whole (e.g. verl pruned only actor/)
DAMAGED = "damaged"  # the step the tracker names, not whole, and nothing whole to fall back to: kept
STATES = (COMPLETE, WRITING, INTERRUPTED, INCOMPLETE, DAMAGED)

SEVERITIES = ("info", "warn", "error")


@dataclass(frozen=True)
class Finding:
    """One observation about an experiment; `error` means the run is at risk (health turns red)."""

    experiment: str
    severity: str  # "info" | "warn" | "error"
    code: str  # stable identifier, e.g. "tracker-missing", "budget-exceeded"
    message: str
    step: int | None = None
    repaired: bool = False

    def as_dict(self) -> dict:
        return {
            "experiment": self.experiment, "severity": self.severity, "code": self.code,
            "message": self.message, "step": self.step, "repaired": self.repaired,
        }


@dataclass(frozen=True)
class TrackerFix:
    experiment: Path
    old: str  # tracker status or the stale step it named
    new_step: int


def classify(exp: Experiment, now: float, grace_s: float) -> tuple[dict[int, str], int | None, TrackerFix | None, list[Finding]]:
    """States of every step dir, the tracker step in force afterwards, and the tracker repair if needed."""
    name = str(exp.path)
    findings: list[Finding] = []
    recent = {s.step for s in exp.steps if now - s.newest_mtime < grace_s}
    by_step = {s.step: s for s in exp.steps}
    tracker = exp.tracker
    tracker_recent = tracker.mtime is not None and now - tracker.mtime < grace_s

    trusted: int | None = None  # tracker step when the tracker is valid
    broken = ""  # why the tracker cannot be trusted
    # The watchdog wrote this tracker and verl has not rewritten it since, yet a newer save is whole and
    # quiet: verl writes no tracker (0.8.0's async_save), so that save is not an interrupted one.
    unmaintained = tracker.status == "ok" and tracker.ours and any(
        s.complete and s.step > tracker.step and s.step not in recent for s in exp.steps)
    if unmaintained:
        broken = (f"names step {tracker.step} as the watchdog wrote it and verl has written no tracker since "
                  "(async_save writes none)")
    elif tracker.status == "ok":
        named = by_step.get(tracker.step)
        if named is None:
            broken = f"names step {tracker.step}, whose directory is gone"
        elif named.complete or named.step in recent:
            # A named step still being written happens only mid-rename; wait for the grace period.
            trusted = tracker.step
        else:
            broken = f"names step {tracker.step}, which is incomplete ({named.problem})"
    elif tracker.status == "missing":
        broken = "is missing"
    elif tracker.status == "empty":
        broken = "is empty"
    else:
        broken = f"is unparsable ({tracker.raw.strip()[:40]!r})"

    states: dict[int, str] = {}
    fix: TrackerFix | None = None
    if trusted is not None:
        for s in exp.steps:
            if s.step in recent:
                states[s.step] = WRITING if not (s.complete and s.step <= trusted) else COMPLETE
            elif s.step > trusted:
                states[s.step] = INTERRUPTED
            else:
                states[s.step] = COMPLETE if s.complete else INCOMPLETE
        return states, trusted, None, findings

    # No trustworthy tracker: a whole, quiet step dir is resumable no matter its number.
    candidates = [s.step for s in exp.steps if s.complete and s.step not in recent]
    target = max(candidates) if candidates else None
    named = tracker.step if tracker.status == "ok" else None
    for s in exp.steps:
        if s.step in recent:
            states[s.step] = WRITING
        elif s.complete:
            states[s.step] = COMPLETE
        elif target is not None:
            states[s.step] = INCOMPLETE if s.step < target else INTERRUPTED
        elif named is not None and s.step <= named:
            # Nothing whole to resume from: keep what the tracker names (and below) for salvage.
            states[s.step] = DAMAGED
        else:
            states[s.step] = INTERRUPTED
    if tracker.status in ("empty", "unparsable") and tracker_recent:
        # verl rewrites the tracker with open("w"): it is empty for a moment on every save.
        findings.append(Finding(name, "info", "tracker-being-written", f"tracker {broken}; written "
                                f"{now - tracker.mtime:.0f}s ago, waiting for the grace period"))
        return states, None, None, findings
    if target is not None and unmaintained:
        fix = TrackerFix(exp.path, str(tracker.step), target)
        findings.append(Finding(name, "info", "tracker-advanced",
                                f"tracker {broken} -> advanced to the newest complete step {target}", step=target))
        return states, target, fix, findings
    if target is not None:
        old = str(tracker.step) if tracker.status == "ok" else tracker.status
        fix = TrackerFix(exp.path, old, target)
        findings.append(Finding(name, "warn", f"tracker-{_code(tracker.status, by_step, tracker.step)}",
                                f"tracker {broken}; auto-resume would restart at step 0 -> set to step {target}",
                                step=target))
        return states, target, fix, findings
    if any(st != WRITING for st in states.values()) or tracker.status == "ok":
        findings.append(Finding(name, "error", "no-complete-checkpoint",
                                f"tracker {broken} and no complete checkpoint exists: auto-resume will restart "
                                "at step 0"))
    return states, None, None, findings


def _code(status: str, by_step: dict[int, StepDir], step: int | None) -> str:
    if status != "ok":
        return status
    return "dangling" if step not in by_step else "incomplete"


def write_tracker(experiment: Path, step: int) -> None:
    """Rewrite verl's tracker file (TRACKER_NAME) atomically (temp file, fsync, rename), and note that the
    watchdog wrote it: while the file stays as written, verl has written no tracker since (async_save),
    and the watchdog keeps advancing it instead of taking newer saves for interrupted ones."""
    path = experiment / TRACKER_NAME
    atomic_write_text(path, str(step))
    st = path.stat()
    note = {"step": step, "ino": st.st_ino, "mtime_ns": st.st_mtime_ns, "size": st.st_size}
    atomic_write_text(tracker_note_path(experiment), json.dumps(note) + "\n")



def resume_check(root: Path, repair: bool = True, grace_s: float = 0.0, zip_check: bool = True) -> list[Finding]:
    """Check (and with `repair`, fix) verl's resume tracker of every experiment under `root`.

    A tracker that is missing, empty, unparsable or names a step directory that is gone or incomplete
    is rewritten atomically to the newest complete step, so `trainer.resume_mode=auto` continues
    instead of restarting at step 0. Deletes nothing. `grace_s`: step dirs written to more recently
    than this are treated as saves in progress (0 before a launch, when no trainer runs).

    Returns one Finding per experiment at least: severity "info" (fine), "warn" (repaired, or
    would be repaired when `repair` is False) or "error" (auto-resume will restart at step 0).
    """
    root = Path(os.path.realpath(root))
    if not root.is_dir():
        return [Finding(str(root), "info", "no-root", f"{root} does not exist: nothing to resume")]
    scan = scan_root(root, ZipCache(zip_check), count_all=False)
    now = time.time()
    findings = []
    for exp in scan.experiments:
        _, effective, fix, found = classify(exp, now, grace_s)
        if repair and fix is not None:
            write_tracker(fix.experiment, fix.new_step)
            log.warning("%s: tracker was %s; rewrote it to step %d", fix.experiment, fix.old, fix.new_step)
            found = [replace(f, repaired=True) if f.code.startswith("tracker-") else f for f in found]
        findings += found
        if not found:
            msg = (f"auto-resume continues from step {effective}" if effective is not None
                   else "no checkpoint yet: the run starts at step 0")
            findings.append(Finding(str(exp.path), "info", "tracker-ok", msg, effective))
    if not scan.experiments:
        findings.append(Finding(str(root), "info", "no-checkpoints", f"no verl checkpoints under {root}"))
    return findings

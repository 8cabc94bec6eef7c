"""Pure decisions: which checkpoints are complete, which to delete, whether the tracker needs repair.

Input is a snapshot read by rlrecipes/verl/checkpoints.py (scan_root) plus the clock; output is a Decision that
actions.py carries out.
Nothing here touches the filesystem, so every rule is testable with literal cases.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rlrecipes.fsutil import human_bytes
from rlrecipes.verl.checkpoints import Experiment, StepDir
from rlrecipes.verl.resume import COMPLETE, DAMAGED, INCOMPLETE, INTERRUPTED, WRITING, Finding, TrackerFix, classify

@dataclass(frozen=True)
class Deletion:
    experiment: Path
    path: Path
    step: int
    bytes: int
    reason: str  # "interrupted" | "incomplete" | "keep-last" | "budget"
    newest_mtime: float = 0.0  # as scanned: a newer write since then cancels the deletion
    problem: str = ""  # why the step is not whole, as scanned ("actor/ missing": what verl's own pruning leaves)

    @property
    def verl_pruned(self) -> bool:
        """verl's checkpoint manager removes only `actor/` of the saves it prunes; `data.pt` stays behind."""
        return self.reason == "incomplete" and self.problem == "actor/ missing"


@dataclass
class ExperimentDecision:
    experiment: Path
    states: dict[int, str]
    newest_complete: int | None
    effective_tracker: int | None  # the step auto-resume will load once the plan is carried out
    next_checkpoint_bytes: int  # estimate of what the next save still has to write


@dataclass
class Decision:
    experiments: list[ExperimentDecision] = field(default_factory=list)
    deletions: list[Deletion] = field(default_factory=list)
    fixes: list[TrackerFix] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    need_bytes: int = 0
    room_bytes: int | None = None  # budget left before this plan (None: no budget configured)
    room_after_bytes: int | None = None

    @property
    def healthy(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)


@dataclass(frozen=True)
class Retention:
    keep_last: int = 2
    keep_every: int | None = None
    grace_s: float = 300.0


def plan(experiments: list[Experiment], now: float, retention: Retention, room_bytes: int | None,
         floor_bytes: int = 0, first_checkpoint_bytes: int = 0) -> Decision:
    """Decide deletions and tracker repairs for every experiment under the root.

    `room_bytes` is what the budget still allows before this plan (quota minus usage, or free space minus
    the required minimum); None when no budget is configured. `floor_bytes` is that required minimum (so
    room + floor is the space physically left); `first_checkpoint_bytes` the size of one checkpoint before any
    is on disk (the planner's figure, `rlrecipes plan`), 0 when unknown.
    """
    if retention.keep_last < 1:
        raise ValueError("keep_last must be >= 1: the newest complete checkpoint is never deleted")
    out = Decision(room_bytes=room_bytes)
    budget_candidates: list[StepDir] = []
    exp_of: dict[Path, Path] = {}
    for exp in experiments:
        states, effective, fix, findings = classify(exp, now, retention.grace_s)
        out.findings.extend(findings)
        if fix:
            out.fixes.append(fix)
        complete = [s for s in exp.steps if states[s.step] == COMPLETE]
        newest = complete[-1] if complete else None
        keep = {s.step for s in complete[-retention.keep_last:]}
        if retention.keep_every:
            keep |= {s.step for s in complete if s.step % retention.keep_every == 0}
        for s in exp.steps:
            exp_of[s.path] = exp.path
            state = states[s.step]
            if state in (WRITING, DAMAGED) or s is newest:
                continue  # never deleted, not even for the budget
            if state in (INTERRUPTED, INCOMPLETE):
                out.deletions.append(Deletion(exp.path, s.path, s.step, s.bytes, state, s.newest_mtime, s.problem))
            elif s.step not in keep:
                out.deletions.append(Deletion(exp.path, s.path, s.step, s.bytes, "keep-last", s.newest_mtime))
            else:
                budget_candidates.append(s)
        # The next save will be about as big as the last whole one; what is already written counts.
        in_flight = sum(s.bytes for s in exp.steps if states[s.step] == WRITING
                        and (newest is None or s.step > newest.step))
        next_bytes = max(0, newest.bytes - in_flight) if newest else 0
        out.need_bytes = max(out.need_bytes, next_bytes)
        out.experiments.append(ExperimentDecision(exp.path, states, newest.step if newest else None,
                                              effective, next_bytes))

    if room_bytes is None:
        return out
    room = room_bytes + sum(d.bytes for d in out.deletions)
    if room < out.need_bytes:
        # Oldest first across experiments; the newest complete checkpoint of each is never a candidate.
        for s in sorted(budget_candidates, key=lambda s: (s.newest_mtime, s.step)):
            if room >= out.need_bytes:
                break
            out.deletions.append(Deletion(exp_of[s.path], s.path, s.step, s.bytes, "budget", s.newest_mtime))
            room += s.bytes
    out.room_after_bytes = room
    if not any(exp.steps for exp in experiments):
        # Nothing saved yet: nothing to free and no measured size. A disk already below the floor is worth a
        # warning, not a red health that keeps the trainer from ever starting; only a first checkpoint that
        # cannot fit even into all the space left is.
        if first_checkpoint_bytes and room_bytes + floor_bytes < first_checkpoint_bytes:
            out.findings.append(Finding(
                "", "error", "first-checkpoint-cannot-fit",
                f"one checkpoint needs {human_bytes(first_checkpoint_bytes)} but only "
                f"{human_bytes(max(room_bytes + floor_bytes, 0))} is left: the first save would fail; free space "
                "or move the checkpoint volume"))
        elif room < 0:
            out.findings.append(Finding(
                "", "warn", "below-floor",
                f"{human_bytes(-room)} below the budget already, before any checkpoint: nothing to free yet; "
                "the first save may fill the disk"
                + ("" if first_checkpoint_bytes else " (pass --checkpoint-size from `rlrecipes plan` to check it fits)")))
        return out
    if room < out.need_bytes:
        out.findings.append(Finding(
            "", "error", "budget-exceeded",
            f"the budget cannot hold the next checkpoint: it needs {human_bytes(out.need_bytes)}, only "
            f"{human_bytes(max(room, 0))} is left after deleting every checkpoint but the newest complete one"
            + (f" ({human_bytes(-room)} over budget already)" if room < 0 else "")
            + "; free space, raise the quota or lower --min-free before the next save fails"))
    return out


_UNITS = {
    "": 1, "b": 1,
    "k": 1024, "kib": 1024, "kb": 1000,
    "m": 1024**2, "mib": 1024**2, "mb": 1000**2,
    "g": 1024**3, "gib": 1024**3, "gb": 1000**3,
    "t": 1024**4, "tib": 1024**4, "tb": 1000**4,
}


def parse_size(text: str) -> int:
    """'20G' -> 20 GiB. K/M/G/T and KiB.. are binary, KB/MB/GB/TB decimal; a bare number is bytes."""
    import re

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text or "")
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"not a size: {text!r} (use e.g. 500M, 20G, 1.5TiB, 10GB or a byte count)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])

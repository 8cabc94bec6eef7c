"""One watchdog pass (scan -> plan -> act -> report) and the loop around it."""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from rlrecipes.watchdog import actions
from rlrecipes.verl.checkpoints import Experiment, StepCache, ZipCache, default_status_path, scan_root, tree_stats
from rlrecipes.fsutil import atomic_write_bytes, human_bytes
from rlrecipes.verl.resume import WRITING, Finding, write_tracker
from rlrecipes.watchdog.policy import Decision, Retention, plan
from rlrecipes.watchdog.progress import DEFAULT_STARTUP_S, Progress
from rlrecipes.watchdog.status import STATUS_VERSION, MetricsServer, write_status

log = logging.getLogger("rlrecipes.watchdog")

DEFAULT_GRACE_S = 300.0
REPEAT_S = 600.0  # an error finding that lasts is logged again this often
# Kept on the checkpoint volume so that the status file can still be written once the volume is full: the one
# moment the status matters most (the trainer's save just failed; the healthcheck and the stop guard read it).
RESERVE_BYTES = 256 << 10  # a status file is a few KiB; one with hundreds of steps listed still fits
RESERVE_NAME = "reserve"


@dataclass
class WatchdogConfig:
    root: Path
    retention: Retention = field(default_factory=Retention)
    quota_bytes: int | None = None  # budget: bytes allowed under the root
    min_free_bytes: int | None = None  # budget: free bytes to keep on the root's filesystem
    first_checkpoint_bytes: int = 0  # size of one checkpoint before any exists (planner's figure; 0: unknown)
    interval_s: float | None = 60.0  # None: a single pass
    dry_run: bool = False
    status_path: Path | None = None  # None: <root>/.watchdog/status.json
    hogs: list[tuple[str, str, Path]] = field(default_factory=list)  # (name, kind, path)
    zip_check: bool = True
    progress: list[Path] = field(default_factory=list)  # the run's logs: a stall turns health red
    stall_after_s: float | None = None  # None: derived from the run's step times
    stall_startup_s: float = DEFAULT_STARTUP_S
    total_steps: int | None = None  # the run's last step: reaching it is finishing, not stalling


class Watchdog:
    def __init__(self, config: WatchdogConfig):
        if config.quota_bytes is not None and config.min_free_bytes is not None:
            raise ValueError("give either a quota or a minimum of free space, not both")
        self.config = config
        self.root = Path(os.path.realpath(config.root))
        self.status_path = config.status_path or default_status_path(self.root)
        self.zips = ZipCache(config.zip_check)
        self.steps = StepCache(settled_s=config.retention.grace_s)
        self.counters = {"scans": 0, "deleted": 0, "deleted_bytes": 0, "tracker_repairs": 0, "errors": 0}
        self.metrics: MetricsServer | None = None
        self.progress = (Progress(list(config.progress), config.stall_after_s, config.stall_startup_s,
                                  config.total_steps) if config.progress else None)
        self.last_status: dict = {}
        # an error finding (code, experiment) still standing -> (when first logged, when last logged)
        self._said: dict[tuple[str, str], tuple[float, float]] = {}

    def room_bytes(self, root_bytes: int) -> tuple[int | None, actions.DiskUsage]:
        usage = actions.disk_usage(self.root)
        if self.config.quota_bytes is not None:
            return self.config.quota_bytes - root_bytes, usage
        if self.config.min_free_bytes is not None:
            return usage.fs_free - self.config.min_free_bytes, usage
        return None, usage

    def run_once(self) -> dict:
        started = time.perf_counter()
        cfg = self.config
        if not self.root.is_dir():
            raise FileNotFoundError(f"checkpoint root {self.root} is not a directory")
        scan = scan_root(self.root, self.zips, count_all=cfg.quota_bytes is not None, cache=self.steps)
        if not cfg.dry_run:
            # Normally empty: removal follows each rename. Leftovers come from a process killed mid-rmtree.
            if actions.empty_trash(self.root, [e.path for e in scan.experiments]):
                log.warning("finished removing what an interrupted removal left in the trash")
        now = time.time()
        room, usage = self.room_bytes(scan.root_bytes)
        decided = plan(scan.experiments, now, cfg.retention, room, floor_bytes=cfg.min_free_bytes or 0,
                       first_checkpoint_bytes=cfg.first_checkpoint_bytes)
        findings = list(decided.findings)
        for link in scan.symlinks:
            target = os.path.realpath(link)
            inside = target == str(self.root) or target.startswith(str(self.root) + os.sep)
            if not inside:
                findings.append(Finding(str(link.parent), "info", "symlink-ignored",
                                        f"{link.name} -> {target} points outside the root: not followed"))
        done = [] if cfg.dry_run else self._act(decided, findings)
        progress = None
        if self.progress is not None:
            self.progress.update(now)
            stalled, message, progress = self.progress.verdict(now)
            # A save in flight is a step above the newest whole one. A step below it written to lately is what
            # verl's own pruning just left (it removes actor/, which touches the step dir): no save, so it must
            # not hide a stall for the grace period after every save.
            saving = any(state == WRITING and (ep.newest_complete is None or step > ep.newest_complete)
                         for ep in decided.experiments for step, state in ep.states.items())
            progress["saving"] = saving
            if stalled and not saving:  # a long save is progress too
                findings.append(Finding("", "error", "run-stalled", message, self.progress.step))
        self._log_errors(findings, now)
        hogs = self._hogs()
        status = self._status(scan, decided, findings, done, usage, hogs, now, time.perf_counter() - started)
        status["progress"] = progress
        self.last_status = status
        self._write_status(status)
        if self.metrics:
            self.metrics.update(status)
        return status

    def _log_errors(self, findings: list[Finding], now: float) -> None:
        """Each error finding once when it appears, again every REPEAT_S while it lasts (its figures change from
        pass to pass), and an info line when it is gone: a volume full for hours is a handful of lines, not one
        every pass."""
        errors = {(f.code, f.experiment): f for f in findings if f.severity == "error"}
        for key, f in errors.items():
            since, said = self._said.get(key, (now, None))
            if said is None or now - said >= REPEAT_S:
                log.error("%s%s%s", f"{f.experiment}: " if f.experiment else "", f.message,
                          f" (still, for {now - since:.0f} s)" if said is not None else "")
                self._said[key] = (since, now)
        for key in [k for k in self._said if k not in errors]:
            since, _ = self._said.pop(key)
            log.info("%s%s cleared after %.0f s", f"{key[1]}: " if key[1] else "", key[0], now - since)

    def _write_status(self, status: dict) -> None:
        """Write the status file; on a full volume, give up the reserve for it and say the disk is full."""
        reserve = self.status_path.parent / RESERVE_NAME
        try:
            write_status(self.status_path, status)
        except OSError as exc:
            if exc.errno != errno.ENOSPC or not reserve.is_file():
                raise
            reserve.unlink()
            self.counters["errors"] += 1
            status["counters"] = dict(self.counters)
            status["healthy"] = False
            message = (f"the checkpoint volume is full ({human_bytes(status['budget']['fs_free_bytes'])} free): a "
                       "save now fails; the watchdog gave up its reserve to write this status")
            status["findings"].append(Finding("", "error", "disk-full", message).as_dict())
            log.error(message)
            write_status(self.status_path, status)
            return
        # Taken back only with room to spare: on a nearly full volume the last MiB is not worth a fight.
        if (not reserve.exists() and not self.config.dry_run
                and actions.disk_usage(reserve.parent).fs_free >= 2 * RESERVE_BYTES):
            _keep_reserve(reserve)

    def _act(self, decided: Decision, findings: list[Finding]) -> list[dict]:
        done: list[dict] = []
        for fix in decided.fixes:
            try:
                write_tracker(fix.experiment, fix.new_step)
            except OSError as exc:
                self.counters["errors"] += 1
                findings.append(Finding(str(fix.experiment), "error", "tracker-repair-failed",
                                        f"cannot rewrite the tracker: {exc.strerror}", fix.new_step))
                continue
            self.counters["tracker_repairs"] += 1
            log.warning("%s: tracker was %s; rewrote it to step %d so auto-resume continues",
                        fix.experiment, fix.old, fix.new_step)
        for d in decided.deletions:
            # Look again right before deleting: a save may have started in this directory since the scan.
            fresh = tree_stats(d.path)
            self.steps.forget(d.path)
            if fresh.newest_mtime > d.newest_mtime:
                log.info("%s: written to since the scan, kept", d.path)
                continue
            try:
                actions.remove_checkpoint(self.root, d.path)
            except actions.UnsafePath as exc:
                findings.append(Finding(str(d.experiment), "warn", "delete-refused", str(exc), d.step))
                log.error("refused to delete %s: %s", d.path, exc)
                continue
            except OSError as exc:
                # The budget cannot be enforced: as loud as running out of space.
                self.counters["errors"] += 1
                hint = (" (the watchdog's user cannot modify the trainer's files: see docs/watchdog.md, "
                        "'Permissions')") if exc.errno in (errno.EACCES, errno.EPERM) else ""
                findings.append(Finding(str(d.experiment), "error", "delete-failed",
                                        f"cannot delete {d.path}: {exc.strerror}{hint}", d.step))
                continue
            self.zips.forget(str(d.path))
            self.counters["deleted"] += 1
            self.counters["deleted_bytes"] += fresh.bytes
            done.append({"path": str(d.path), "step": d.step, "bytes": fresh.bytes, "reason": d.reason})
            level = logging.INFO if d.reason == "keep-last" or d.verl_pruned else logging.WARNING
            log.log(level, "deleted %s (%s, %s)%s", d.path, d.reason, human_bytes(fresh.bytes),
                    ": what verl's own pruning left of it (data.pt without actor/)" if d.verl_pruned else "")
        return done

    def _hogs(self) -> list[dict]:
        out = []
        for name, kind, path in self.config.hogs:
            try:
                size = actions.hog_size(kind, path)
            except OSError as exc:  # e.g. --watch x=/proc: report it, keep watching checkpoints
                log.warning("cannot size %s (%s): %s", name, path, exc.strerror or exc)
                size = None
            out.append({"name": name, "kind": kind, "path": str(path),
                        "bytes": size[0] if size else None, "items": size[1] if size else None})
        return out

    def _status(self, scan, decided: Decision, findings, done, usage, hogs, now, seconds) -> dict:
        self.counters["scans"] += 1
        cfg = self.config
        deleted_paths = {d["path"] for d in done}
        planned = {str(d.path): d.reason for d in decided.deletions}
        experiments = []
        by_path = {e.experiment: e for e in decided.experiments}
        for exp in scan.experiments:
            ep = by_path[exp.path]
            experiments.append({
                "name": _exp_name(self.root, exp),
                "path": str(exp.path),
                "tracker": {"status": exp.tracker.status, "step": exp.tracker.step},
                "resume_step": ep.effective_tracker,
                "newest_complete": ep.newest_complete,
                "next_checkpoint_bytes": ep.next_checkpoint_bytes,
                "steps": [
                    {"step": s.step, "state": ep.states[s.step], "bytes": s.bytes, "files": s.files,
                     "problem": s.problem, "deleted": str(s.path) in deleted_paths,
                     "planned_deletion": planned.get(str(s.path))}
                    for s in exp.steps
                ],
            })
        healthy = not any(f.severity == "error" for f in findings)
        return {
            "version": STATUS_VERSION,
            "time": now,
            "pid": os.getpid(),
            "root": str(self.root),
            "interval_s": cfg.interval_s,
            "dry_run": cfg.dry_run,
            "healthy": healthy,
            "scan_seconds": round(seconds, 4),
            "root_bytes": scan.root_bytes,
            "policy": {"keep_last": cfg.retention.keep_last, "keep_every": cfg.retention.keep_every,
                       "grace_s": cfg.retention.grace_s, "quota_bytes": cfg.quota_bytes,
                       "min_free_bytes": cfg.min_free_bytes},
            "budget": {"fs_total_bytes": usage.fs_total, "fs_free_bytes": usage.fs_free,
                       "need_bytes": decided.need_bytes, "room_bytes": decided.room_bytes,
                       "room_after_bytes": decided.room_after_bytes},
            "experiments": experiments,
            "deleted": done,
            "tracker_fixes": [{"experiment": str(f.experiment), "old": f.old, "new_step": f.new_step,
                               "applied": not cfg.dry_run} for f in decided.fixes],
            "findings": [f.as_dict() for f in findings],
            "hogs": hogs,
            "errors": scan.errors,
            "counters": dict(self.counters),
        }

    def serve_metrics(self, host: str, port: int) -> int:
        self.metrics = MetricsServer(host, port).start()
        return self.metrics.port

    def loop(self, stop: threading.Event) -> None:
        interval = self.config.interval_s or 60.0
        while not stop.is_set():
            try:
                self.run_once()
            except OSError as exc:  # e.g. the volume went away: keep trying, the stale status turns health red
                self.counters["errors"] += 1
                log.error("watchdog pass failed: %s", exc)
            except Exception as exc:  # keep watching: one bad pass must not take the sidecar down
                self.counters["errors"] += 1
                log.exception("watchdog pass failed: %s", exc)
            stop.wait(interval)
        if self.metrics:
            self.metrics.stop()


def _keep_reserve(reserve: Path) -> None:
    """Set RESERVE_BYTES aside (written, not sparse); where the space is not there yet, try again next pass."""
    try:
        atomic_write_bytes(reserve, bytes(RESERVE_BYTES))  # a failed write leaves no temporary file behind
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise


def _exp_name(root: Path, exp: Experiment) -> str:
    rel = os.path.relpath(exp.path, root)
    return "." if rel == "." else rel



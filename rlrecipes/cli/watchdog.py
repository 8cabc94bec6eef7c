"""`rlrecipes watchdog`: the checkpoint watchdog sidecar (stdlib only: runs in the slim image); `resume-check`
and `healthcheck` take their --root and logging helpers from here."""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import signal
import sys
import threading
from pathlib import Path

from rlrecipes.errors import EXIT_FAILED, EXIT_OK, RecipeError, StageFailed
from rlrecipes.fsutil import claim_or_refuse, human_bytes
from rlrecipes.verl.checkpoints import WATCHDOG_DIR, step_dir
from rlrecipes.watchdog.actions import HOG_KINDS
from rlrecipes.watchdog.policy import Retention, parse_size
from rlrecipes.watchdog.progress import DEFAULT_STARTUP_S
from rlrecipes.watchdog.runner import DEFAULT_GRACE_S, Watchdog, WatchdogConfig

log = logging.getLogger("rlrecipes.watchdog")


def nonempty_path(text: str) -> Path:
    """argparse type: Path("") is Path("."), so an empty --root would silently mean the current directory."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty path (name the directory explicitly)")
    return Path(text)


def root_argument(parser: argparse.ArgumentParser) -> None:
    default = os.environ.get("CKPT_DIR")
    parser.add_argument("--root", type=nonempty_path, default=Path(default) if default else None, required=default is None,
                        help="checkpoint root: one verl default_local_dir or a folder of them "
                             "(default: $CKPT_DIR)" if default is None else f"checkpoint root (default: {default})")


def setup_logging(level: str | None, default: str) -> None:
    """The watchdog's own --log-level wins, then the global `rlrecipes -v/-q/--log-level`, then `default`."""
    from rlrecipes import ui

    level = level or ui.LOG_LEVEL or default
    logging.basicConfig(level=getattr(logging, level.upper()), stream=sys.stderr,
                        format="%(asctime)s watchdog %(levelname)s %(message)s", force=True)


def watchdog_arguments(parser: argparse.ArgumentParser) -> None:
    root_argument(parser)
    parser.add_argument("--keep-last", type=int, default=2, metavar="K",
                        help="keep the newest K complete checkpoints (default 2, at least 1)")
    parser.add_argument("--keep-every", type=int, default=None, metavar="M",
                        help="also keep every complete checkpoint whose step is a multiple of M")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--quota", metavar="SIZE", help="bytes allowed under the root, e.g. 200G")
    budget.add_argument("--min-free", metavar="SIZE",
                        help="free space to keep on the root's filesystem, e.g. 20G (default: $WATCHDOG_MIN_FREE "
                             "when neither --quota nor --min-free is given; the watchdog image sets it)")
    parser.add_argument("--checkpoint-size", metavar="SIZE", default=None,
                        help="size of one checkpoint before any is on disk (`rlrecipes plan`'s figure): the first "
                             "pass is unhealthy only when not even one fits; without it a disk already below the "
                             "budget is a warning")
    parser.add_argument("--interval", type=float, default=60.0, metavar="S", help="seconds between passes (60)")
    parser.add_argument("--grace", type=float, default=DEFAULT_GRACE_S, metavar="S",
                        help="a step dir written to within S seconds is a save in progress and never touched; "
                             f"a quiet one above the tracker is an interrupted save (default {DEFAULT_GRACE_S:.0f})")
    parser.add_argument("--once", action="store_true", help="one pass, then exit (1 when unhealthy)")
    parser.add_argument("--dry-run", action="store_true",
                        help="change no checkpoint and no tracker; report what would be done")
    parser.add_argument("--status", type=nonempty_path, default=None, metavar="FILE",
                        help="JSON status file (default <root>/.watchdog/status.json)")
    parser.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                        help="serve Prometheus metrics on 127.0.0.1:PORT (/metrics, /status, /healthz); off by default")
    parser.add_argument("--watch", action="append", default=[], metavar="NAME=PATH",
                        help="also report the size of a disk hog; NAME ray, wandb or hf-cache picks what is "
                             "counted (session_*, offline-run-*, everything), any other name counts the whole "
                             "tree. Repeatable")
    parser.add_argument("--no-zip-check", action="store_true",
                        help="do not verify that .pt files are whole torch.save archives (for writers that "
                             "do not use torch.save)")
    parser.add_argument("--progress", action="append", default=[], type=nonempty_path, metavar="PATH",
                        help="the run's log directory or log file (metrics-*.jsonl, console-*.log); when no new "
                             "training step appears within the stall limit, the run is unhealthy. Repeatable")
    parser.add_argument("--stall-after", type=float, default=None, metavar="S",
                        help="stall limit in seconds (default: derived from the run's logged step times)")
    parser.add_argument("--total-steps", type=int, default=None, metavar="N",
                        help="the run's last step (rlrecipes plan): once logged, the run is finished, not stalled")
    parser.add_argument("--stall-startup", type=float, default=DEFAULT_STARTUP_S, metavar="S",
                        help=f"stall limit before the first step is logged (default {DEFAULT_STARTUP_S:.0f})")
    parser.add_argument("--log-level", choices=["debug", "info", "warning", "error"],
                        help="default: info, or what the global `rlrecipes -v/-q/--log-level` set")


def _size(text: str | None, flag: str) -> int | None:
    if text is None:
        return None
    try:
        return parse_size(text)
    except ValueError as exc:
        raise RecipeError(str(exc), where=flag) from None


def _hogs(items: list[str]) -> list[tuple[str, str, Path]]:
    out = []
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise RecipeError(f"expected NAME=PATH, got {item!r}", where="--watch",
                              hint="e.g. --watch ray=/tmp/ray --watch hf-cache=/workspace/hf-cache")
        out.append((name, name if name in HOG_KINDS else "path", Path(path)))
    return out


# Longest duration any flag accepts: beyond it a number is a typo (and time.time() + it overflows nothing).
MAX_SECONDS = 365 * 24 * 3600.0


def seconds(value: float | None, flag: str, *, positive: bool = False) -> float | None:
    """A duration flag: finite, >= 0 (> 0 with `positive`), at most a year. NaN compares false to
    everything, so `--grace nan` used to pass `< 0` and make every save in progress look quiet."""
    if value is None:
        return None
    if not math.isfinite(value) or value < 0 or (positive and value == 0) or value > MAX_SECONDS:
        need = "positive" if positive else ">= 0"
        raise RecipeError(f"must be {need}: a finite number of seconds up to {MAX_SECONDS:.0f}, got {value!r}",
                          where=flag)
    return value


def checked_root(root: Path | None, flag: str = "--root") -> Path:
    """The checkpoint root, refused when empty (it would be the current directory) or the filesystem root."""
    if root is None or str(root).strip() == "":
        raise RecipeError("empty checkpoint root", where=flag,
                          hint="name the directory explicitly (e.g. --root /workspace/checkpoints)")
    if os.path.realpath(root) == os.path.realpath(os.sep):
        raise RecipeError("refusing to watch the filesystem root /", where=flag,
                          hint="name the checkpoint directory (trainer.default_local_dir or its parent)")
    return root


def config_from_args(args: argparse.Namespace) -> WatchdogConfig:
    if args.keep_last < 1:
        raise RecipeError("must be at least 1: the newest complete checkpoint is never deleted", where="--keep-last")
    if args.keep_every is not None and args.keep_every < 1:
        raise RecipeError("must be a positive step count", where="--keep-every")
    seconds(args.interval, "--interval", positive=True)
    seconds(args.grace, "--grace")
    seconds(args.stall_after, "--stall-after", positive=True)
    seconds(args.stall_startup, "--stall-startup", positive=True)
    if args.total_steps is not None and args.total_steps < 1:
        raise RecipeError("must be >= 1", where="--total-steps")
    if args.stall_after is not None and not args.progress:
        raise RecipeError("a stall limit needs the run's logs to follow", where="--stall-after",
                          hint="add --progress LOG_DIR (the run's directory under $LOG_DIR)")
    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        raise RecipeError(f"not a TCP port: {args.metrics_port}", where="--metrics-port",
                          hint="use 1-65535, or 0 to pick a free one")
    checked_root(args.root)
    if not args.root.is_dir():
        raise RecipeError("checkpoint root does not exist or is not a directory", where=str(args.root),
                          hint="create it (the trainer's trainer.default_local_dir or its parent) or mount the volume")
    return WatchdogConfig(
        root=args.root,
        retention=Retention(keep_last=args.keep_last, keep_every=args.keep_every, grace_s=args.grace),
        quota_bytes=_size(args.quota, "--quota"),
        min_free_bytes=_size(args.min_free, "--min-free") if args.min_free or args.quota else
        _size(os.environ.get("WATCHDOG_MIN_FREE") or None, "WATCHDOG_MIN_FREE"),
        first_checkpoint_bytes=_size(args.checkpoint_size, "--checkpoint-size") or 0,
        interval_s=None if args.once else args.interval,
        dry_run=args.dry_run,
        status_path=args.status,
        hogs=_hogs(args.watch),
        zip_check=not args.no_zip_check,
        progress=list(args.progress),
        stall_after_s=args.stall_after,
        stall_startup_s=args.stall_startup,
        total_steps=args.total_steps,
    )


def watchdog(args: argparse.Namespace) -> int:
    setup_logging(args.log_level, "info")
    cfg = config_from_args(args)
    dog = Watchdog(cfg)
    _check_writable(dog.status_path.parent, cfg.dry_run)
    dog.lock_file = _lock_root(dog.root, cfg.dry_run)  # held until the process exits
    budget = (f"quota {human_bytes(cfg.quota_bytes)}" if cfg.quota_bytes is not None
              else f"min free {human_bytes(cfg.min_free_bytes)}" if cfg.min_free_bytes is not None else "no budget")
    log.info("watching %s: keep last %d%s, %s, grace %.0fs, status %s%s", dog.root, cfg.retention.keep_last,
             f" and every {cfg.retention.keep_every}th step" if cfg.retention.keep_every else "", budget,
             cfg.retention.grace_s, dog.status_path, " (dry run)" if cfg.dry_run else "")
    if args.metrics_port is not None:
        try:
            port = dog.serve_metrics("127.0.0.1", args.metrics_port)
        except OSError as exc:
            raise RecipeError(f"cannot listen on 127.0.0.1:{args.metrics_port}: {exc.strerror}",
                              where="--metrics-port", hint="pick a free port, or 0 for any") from None
        log.info("metrics on http://127.0.0.1:%d/metrics", port)
    if args.once:
        status = dog.run_once()
        if dog.metrics:
            dog.metrics.stop()
        print(json.dumps(_summary(status), indent=2))
        return EXIT_OK if status["healthy"] else EXIT_FAILED
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    dog.loop(stop)
    log.info("stopped")
    return EXIT_OK


def _lock_root(root: Path, dry_run: bool):
    """One watchdog per root: an exclusive flock on <root>/.watchdog/lock, held while the process lives.

    Two watchdogs would race each other's deletions and tracker repairs (one deleting a step the other
    just chose as the resume point). The kernel drops the lock when the process dies, so a crash
    leaves no stale lock behind.
    """
    path = root / WATCHDOG_DIR / "lock"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(path, "a+", encoding="utf-8")
    except OSError as exc:
        if dry_run:  # a dry run on a read-only root changes nothing: no lock needed
            log.warning("cannot create %s (%s): dry run without a lock", path, exc.strerror)
            return None
        raise StageFailed(f"cannot create the lock file: {exc.strerror}", where=str(path),
                          hint="the watchdog must be able to write under its root (docs/watchdog.md)") from None
    claim_or_refuse(fh, path, "another watchdog already watches this root", str(root),
                    hint="run one watchdog per checkpoint root; stop the other one first")
    return fh


def _check_writable(status_dir: Path, dry_run: bool) -> None:
    """Fail at start, not on every pass, when the watchdog cannot write where it must."""
    try:
        status_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StageFailed(f"cannot create the status directory: {exc.strerror}", where=str(status_dir),
                          hint=f"the watchdog runs as UID {os.getuid()}: make the checkpoint volume writable for "
                               "it (docs/watchdog.md, 'Permissions') or pass --status FILE elsewhere") from None
    if not os.access(status_dir, os.W_OK):
        raise StageFailed("status directory is not writable", where=str(status_dir),
                          hint=f"the watchdog runs as UID {os.getuid()}: see docs/watchdog.md, 'Permissions'")


def _summary(status: dict) -> dict:
    return {
        "healthy": status["healthy"],
        "experiments": {e["name"]: {"resume_step": e["resume_step"],
                                    "kept": [s["step"] for s in e["steps"] if not s["deleted"]]}
                        for e in status["experiments"]},
        "deleted": status["deleted"],
        "planned_deletions": [{"path": str(step_dir(Path(e["path"]), s["step"])), "step": s["step"],
                               "reason": s["planned_deletion"]}
                              for e in status["experiments"] for s in e["steps"]
                              if s["planned_deletion"] and not s["deleted"]] if status["dry_run"] else [],
        "tracker_fixes": status["tracker_fixes"],
        "findings": [f for f in status["findings"] if f["severity"] != "info"],
        "budget": status["budget"],
    }

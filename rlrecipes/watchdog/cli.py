"""`rlrecipes watchdog`, `rlrecipes resume-check`, `rlrecipes healthcheck` (stdlib only: runs in the slim image)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from rlrecipes.errors import EXIT_FAILED, EXIT_OK, RecipeError, StageFailed
from rlrecipes.watchdog.actions import HOG_KINDS
from rlrecipes.fsutil import human_bytes
from rlrecipes.watchdog.policy import Retention, parse_size
from rlrecipes.watchdog.runner import DEFAULT_GRACE_S, Watchdog, WatchdogConfig, default_status_path
from rlrecipes.watchdog.runner import resume_check as check_trackers
from rlrecipes.watchdog.status import health, read_status

log = logging.getLogger("rlrecipes.watchdog")


def _root_argument(parser: argparse.ArgumentParser) -> None:
    default = os.environ.get("CKPT_DIR")
    parser.add_argument("--root", type=Path, default=Path(default) if default else None, required=default is None,
                        help="checkpoint root: one verl default_local_dir or a folder of them "
                             "(default: $CKPT_DIR)" if default is None else f"checkpoint root (default: {default})")


def _setup_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level.upper()), stream=sys.stderr,
                        format="%(asctime)s watchdog %(levelname)s %(message)s")


def watchdog_arguments(parser: argparse.ArgumentParser) -> None:
    _root_argument(parser)
    parser.add_argument("--keep-last", type=int, default=2, metavar="K",
                        help="keep the newest K complete checkpoints (default 2, at least 1)")
    parser.add_argument("--keep-every", type=int, default=None, metavar="M",
                        help="also keep every complete checkpoint whose step is a multiple of M")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--quota", metavar="SIZE", help="bytes allowed under the root, e.g. 200G")
    budget.add_argument("--min-free", metavar="SIZE", help="free space to keep on the root's filesystem, e.g. 20G")
    parser.add_argument("--interval", type=float, default=60.0, metavar="S", help="seconds between passes (60)")
    parser.add_argument("--grace", type=float, default=DEFAULT_GRACE_S, metavar="S",
                        help="a step dir written to within S seconds is a save in progress and never touched; "
                             f"a quiet one above the tracker is an interrupted save (default {DEFAULT_GRACE_S:.0f})")
    parser.add_argument("--once", action="store_true", help="one pass, then exit (1 when unhealthy)")
    parser.add_argument("--dry-run", action="store_true",
                        help="change no checkpoint and no tracker; report what would be done")
    parser.add_argument("--status", type=Path, default=None, metavar="FILE",
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
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])


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


def config_from_args(args: argparse.Namespace) -> WatchdogConfig:
    if args.keep_last < 1:
        raise RecipeError("must be at least 1: the newest complete checkpoint is never deleted", where="--keep-last")
    if args.keep_every is not None and args.keep_every < 1:
        raise RecipeError("must be a positive step count", where="--keep-every")
    if args.interval <= 0:
        raise RecipeError("must be positive", where="--interval")
    if args.grace < 0:
        raise RecipeError("must be >= 0", where="--grace")
    if not args.root.is_dir():
        raise RecipeError("checkpoint root does not exist or is not a directory", where=str(args.root),
                          hint="create it (the trainer's trainer.default_local_dir or its parent) or mount the volume")
    return WatchdogConfig(
        root=args.root,
        retention=Retention(keep_last=args.keep_last, keep_every=args.keep_every, grace_s=args.grace),
        quota_bytes=_size(args.quota, "--quota"),
        min_free_bytes=_size(args.min_free, "--min-free"),
        interval_s=None if args.once else args.interval,
        dry_run=args.dry_run,
        status_path=args.status,
        hogs=_hogs(args.watch),
        zip_check=not args.no_zip_check,
    )


def watchdog(args: argparse.Namespace) -> int:
    _setup_logging(args.log_level)
    cfg = config_from_args(args)
    dog = Watchdog(cfg)
    _check_writable(dog.status_path.parent, cfg.dry_run)
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
        "planned_deletions": [{"path": str(Path(e["path"]) / f"global_step_{s['step']}"), "step": s["step"],
                               "reason": s["planned_deletion"]}
                              for e in status["experiments"] for s in e["steps"]
                              if s["planned_deletion"] and not s["deleted"]] if status["dry_run"] else [],
        "tracker_fixes": status["tracker_fixes"],
        "findings": [f for f in status["findings"] if f["severity"] != "info"],
        "budget": status["budget"],
    }


def resume_check_arguments(parser: argparse.ArgumentParser) -> None:
    _root_argument(parser)
    parser.add_argument("--check", action="store_true",
                        help="only report; exit 1 if a repair is needed (default: repair)")
    parser.add_argument("--grace", type=float, default=0.0, metavar="S",
                        help="treat step dirs written to within S seconds as saves in progress (default 0: "
                             "nothing is training)")
    parser.add_argument("--no-zip-check", action="store_true", help="do not verify .pt files are whole archives")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")


def resume_check(args: argparse.Namespace) -> int:
    _setup_logging("warning")
    findings = check_trackers(args.root, repair=not args.check, grace_s=args.grace, zip_check=not args.no_zip_check)
    if args.json:
        print(json.dumps([f.as_dict() for f in findings], indent=2))
    else:
        for f in findings:
            tag = "repaired" if f.repaired else f.severity
            print(f"{tag:8s} {f.experiment}: {f.message}")
    if any(f.severity == "error" for f in findings):
        return EXIT_FAILED
    if args.check and any(f.severity == "warn" and not f.repaired for f in findings):
        return EXIT_FAILED
    return EXIT_OK


def healthcheck_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--status", type=Path, metavar="FILE", help="the watchdog's status file")
    group.add_argument("--root", type=Path, help="checkpoint root (status at <root>/.watchdog/status.json); "
                                                 "default $CKPT_DIR")
    parser.add_argument("--max-age", type=float, default=None, metavar="S",
                        help="oldest acceptable status (default: 3 x the watchdog's interval + 30 s)")


def healthcheck(args: argparse.Namespace) -> int:
    if args.status is None and args.root is None:
        if not os.environ.get("CKPT_DIR"):
            raise RecipeError("no status file given", where="healthcheck",
                              hint="pass --status FILE or --root DIR, or set CKPT_DIR")
        args.root = Path(os.environ["CKPT_DIR"])
    path = args.status or default_status_path(args.root)
    try:
        status = read_status(path)
    except FileNotFoundError:
        print(f"unhealthy: {path} does not exist (watchdog not started yet?)")
        return EXIT_FAILED
    except (OSError, ValueError) as exc:
        print(f"unhealthy: {path}: {exc}")
        return EXIT_FAILED
    ok, reason = health(status, max_age_s=args.max_age)
    print(("healthy: " if ok else "unhealthy: ") + reason)
    return EXIT_OK if ok else EXIT_FAILED

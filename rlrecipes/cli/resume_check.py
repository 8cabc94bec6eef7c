"""`rlrecipes resume-check`: would a restart resume from a complete checkpoint, and did the last one?

The rules are rlrecipes/verl/resume.py's."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from rlrecipes.cli.watchdog import checked_root, nonempty_path, root_argument, seconds, setup_logging
from rlrecipes.errors import EXIT_FAILED, EXIT_OK, RecipeError
from rlrecipes.verl.resume import resume_check as check_trackers


def resume_check_arguments(parser: argparse.ArgumentParser) -> None:
    root_argument(parser)
    parser.add_argument("--check", action="store_true",
                        help="only report; exit 1 if a repair is needed (default: repair)")
    parser.add_argument("--grace", type=float, default=0.0, metavar="S",
                        help="treat step dirs written to within S seconds as saves in progress (default 0: "
                             "nothing is training)")
    parser.add_argument("--no-zip-check", action="store_true", help="do not verify .pt files are whole archives")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.add_argument("--after", type=nonempty_path, metavar="CONSOLE_LOG",
                        help="after a launch: fail when its console log shows a resume that trained no step "
                             "(verl's epoch-boundary resume bug); with --total-steps, a resume from the last step "
                             "is fine")
    parser.add_argument("--total-steps", type=int, default=None, metavar="N",
                        help="the run's total training steps (rlrecipes plan), for --after")


def _check_after(log: Path, total_steps: int | None) -> list:
    from rlrecipes.verl.logs import resumed_without_training
    from rlrecipes.verl.resume import Finding

    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except IsADirectoryError:
        raise RecipeError("is a directory: name the launch's console log", where=str(log)) from None
    except FileNotFoundError:
        raise RecipeError("console log not found", where=str(log)) from None
    start = resumed_without_training(text, total_steps)
    if start is None:
        return [Finding(str(log), "info", "resume-trained", "the launch trained after its resume (or started fresh)")]
    return [Finding(str(log), "error", "resume-trained-nothing",
                    f"the launch resumed at step {start} and logged no training step after it: verl's "
                    "epoch-boundary resume bug (a checkpoint saved exactly at the end of an epoch) or a run "
                    "that ended at once; the model is under-trained", start)]


def resume_check(args: argparse.Namespace) -> int:
    setup_logging(None, "warning")
    checked_root(args.root)
    seconds(args.grace, "--grace")
    if os.path.lexists(args.root) and not args.root.is_dir():
        raise RecipeError("checkpoint root is not a directory", where=str(args.root),
                          hint="name the trainer's trainer.default_local_dir or its parent")
    if args.total_steps is not None and args.total_steps < 1:
        raise RecipeError("must be >= 1", where="--total-steps")
    findings = check_trackers(args.root, repair=not args.check, grace_s=args.grace, zip_check=not args.no_zip_check)
    if args.after is not None:
        findings += _check_after(args.after, args.total_steps)
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

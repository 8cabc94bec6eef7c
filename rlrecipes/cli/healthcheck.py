"""`rlrecipes healthcheck`: the container health check over the watchdog's status file."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rlrecipes.cli.watchdog import checked_root, nonempty_path, seconds
from rlrecipes.errors import EXIT_FAILED, EXIT_OK, RecipeError
from rlrecipes.watchdog.runner import default_status_path
from rlrecipes.watchdog.status import health, read_status


def healthcheck_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--status", type=nonempty_path, metavar="FILE", help="the watchdog's status file")
    group.add_argument("--root", type=nonempty_path, help="checkpoint root (status at <root>/.watchdog/status.json); "
                                                 "default $CKPT_DIR")
    parser.add_argument("--max-age", type=float, default=None, metavar="S",
                        help="oldest acceptable status (default: 3 x the watchdog's interval + 30 s)")
    # Only findings something else acts on may be ignored; a misspelled code is an error, not a no-op.
    parser.add_argument("--ignore", action="append", default=[], choices=["run-stalled"], metavar="CODE",
                        help="an error finding that does not make this check fail: run-stalled (the trainer's "
                             "stop guard acts on it; compose.yaml's gate). Repeatable")


def healthcheck(args: argparse.Namespace) -> int:
    if args.status is None and args.root is None:
        if not os.environ.get("CKPT_DIR"):
            raise RecipeError("no status file given", where="healthcheck",
                              hint="pass --status FILE or --root DIR, or set CKPT_DIR")
        args.root = Path(os.environ["CKPT_DIR"])
    seconds(args.max_age, "--max-age", positive=True)
    if args.status is None:
        checked_root(args.root)
    path = args.status or default_status_path(args.root)
    try:
        status = read_status(path)
    except FileNotFoundError:
        print(f"unhealthy: {path} does not exist (watchdog not started yet?)")
        return EXIT_FAILED
    except IsADirectoryError:
        print(f"unhealthy: {path} is a directory, not the watchdog's status file")
        return EXIT_FAILED
    except (OSError, ValueError, RecursionError) as exc:
        print(f"unhealthy: {path}: not a readable status file ({type(exc).__name__}: {str(exc)[:120]})")
        return EXIT_FAILED
    ok, reason = health(status, max_age_s=args.max_age, ignore=frozenset(args.ignore))
    print(("healthy: " if ok else "unhealthy: ") + reason)
    return EXIT_OK if ok else EXIT_FAILED

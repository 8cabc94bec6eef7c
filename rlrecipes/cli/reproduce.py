"""`rlrecipes reproduce RECIPE`: the command; the stages, their state and how each runs are
rlrecipes.launch.reproduce."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from rlrecipes.cli.arguments import recipe_arguments, resolve_recipe
from rlrecipes.process import signal_name, stop_latch
from rlrecipes.launch.reproduce import REPORTS_DIR_DEFAULT, STATE_FILE, Run, plan_stages, run_stage, seeded_environ
from rlrecipes.launch.stages import checkpoint_step, require_gpu, where_it_goes_on


def seed_number(text: str) -> int:
    """A seed names its folders (seed-N/): a whole number >= 0."""
    try:
        seed = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if seed < 0:
        raise argparse.ArgumentTypeError(f"a seed is >= 0, got {seed}")
    return seed


def reproduce_arguments(parser: argparse.ArgumentParser) -> None:
    recipe_arguments(parser)
    parser.add_argument("--restart", action="store_true", help="forget the finished stages and start over")
    parser.add_argument("--list", action="store_true", help="print the stages and their state; run nothing")
    parser.add_argument("--seed", type=seed_number, default=None, metavar="N",
                        help="build the recipe's offline model and data from seed N (canary and smoke recipes) and "
                             "keep the run in seed-N/ folders of its own (models, data, checkpoints, logs, reports)")


def gpu_model(inventory) -> str | None:
    """The model of this host's GPUs when they are all one (expect compares the run's cost only with references
    measured on it); None without GPUs or with mixed ones."""
    names = {gpu.name for gpu in inventory.gpus}
    return names.pop() if len(names) == 1 else None


def say(message: str, error: bool = False) -> None:
    print(f"[reproduce] {message}", file=sys.stderr if error else sys.stdout, flush=True)


def reproduce(args: argparse.Namespace) -> int:
    environ = dict(os.environ) if args.seed is None else seeded_environ(dict(os.environ), args.seed)
    run = resolve_recipe(args, env=environ)
    reports_dir = Path(environ.get("REPORTS_DIR", REPORTS_DIR_DEFAULT))
    from rlrecipes.preflight.inventory import detect_inventory

    inventory = detect_inventory()  # once: whether this host has a GPU, and its model for expect
    stages = plan_stages(run, list(args.overrides), reports_dir, gpu=gpu_model(inventory), seed=args.seed)
    identity = {"recipe": run.name, "profile": run.profile.name, "overrides": list(args.overrides)}
    if args.seed is not None:  # only then: the state of a run started without one stays valid
        identity["seed"] = args.seed
    state = Run(run.log_dir / STATE_FILE, identity, restart=args.restart and not args.list)
    if args.list:
        for stage in stages:
            info = state.stages.get(stage.name, {})
            print(f"{stage.name:8} {info.get('status', 'to do'):12} rlrecipes {' '.join(stage.argv)}")
        return 0
    to_do = [stage for stage in stages if not state.done(stage)]
    if any(stage.gpu for stage in to_do):
        require_gpu(f"rlrecipes reproduce {run.name} ({', '.join(s.name for s in to_do if s.gpu)})", inventory)
    env = {**environ, "RECIPE": run.name, "PROFILE": run.profile.name, **run.paths, "REPORTS_DIR": str(reports_dir)}
    with stop_latch():  # a stop between two stages ends the chain as one within a stage does
        for stage in stages:
            if state.done(stage):
                say(f"{stage.name}: done before (exit {state.stages[stage.name]['exit']}); skipped")
                continue
            say(f"{stage.name}: rlrecipes {' '.join(stage.argv)}")
            state.record(stage, "running", started_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            started = time.monotonic()
            ended = run_stage(stage, env)
            seconds = round(time.monotonic() - started, 1)
            if ended.stopped:
                state.record(stage, "interrupted", exit=ended.status, seconds=seconds,
                             checkpoint=checkpoint_step(run.ckpt_dir))
                say(f"{stage.name} stopped by {signal_name(ended.status)} (exit {ended.status}) after {seconds} s; the "
                    f"same command goes on at {stage.name}"
                    + (f", training {where_it_goes_on(run.ckpt_dir)}" if stage.name == "train" else "")
                    + " (the stages before it are kept)", error=True)
                return ended.status
            if ended.status not in stage.verdicts:
                state.record(stage, "failed", exit=ended.status, seconds=seconds)
                say(f"{stage.name} failed (exit {ended.status}) after {seconds} s; run the same command again to go "
                    f"on from {stage.name} (the stages before it are kept)", error=True)
                return ended.status
            state.record(stage, "done", exit=ended.status, seconds=seconds)
            say(f"{stage.name}: done in {seconds} s")
    verdict = state.stages["expect"]["exit"]
    seed = f" (seed {args.seed})" if args.seed is not None else ""
    say(f"{run.name} on {run.profile.name}{seed}: expected result {'met' if verdict == 0 else 'MISSED'} "
        f"({run.log_dir / 'expect.json'}; report: {reports_dir / run.name / 'report.html'})")
    return verdict

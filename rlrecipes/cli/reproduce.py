"""`rlrecipes reproduce RECIPE`: the command; the stages, their state and how each runs are
rlrecipes.launch.reproduce."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from rlrecipes.cli.arguments import recipe_arguments, resolve_recipe
from rlrecipes.errors import EnvironmentMissing
from rlrecipes.launch.reproduce import REPORTS_DIR_DEFAULT, STATE_FILE, Run, plan_stages, run_stage
from rlrecipes.paths import repo_root


def reproduce_arguments(parser: argparse.ArgumentParser) -> None:
    recipe_arguments(parser)
    parser.add_argument("--restart", action="store_true", help="forget the finished stages and start over")
    parser.add_argument("--list", action="store_true", help="print the stages and their state; run nothing")


def reproduce(args: argparse.Namespace) -> int:
    run = resolve_recipe(args)
    reports_dir = Path(os.environ.get("REPORTS_DIR", REPORTS_DIR_DEFAULT))
    stages = plan_stages(run, list(args.overrides), reports_dir)
    identity = {"recipe": run.name, "profile": run.profile.name, "overrides": list(args.overrides)}
    state = Run(run.log_dir / STATE_FILE, identity, restart=args.restart and not args.list)
    if args.list:
        for stage in stages:
            info = state.stages.get(stage.name, {})
            print(f"{stage.name:8} {info.get('status', 'to do'):12} entrypoint.sh {' '.join(stage.argv)}")
        return 0
    entrypoint = repo_root() / "scripts" / "entrypoint.sh"
    if not entrypoint.is_file():
        raise EnvironmentMissing("no entry point to run the stages with", where=str(entrypoint),
                                 hint="run it in an rlrecipes image (make reproduce) or a full checkout "
                                      "(RLRECIPES_HOME names it)")
    env = {**os.environ, "RECIPE": run.name, "PROFILE": run.profile.name, **run.paths}
    for stage in stages:
        if state.done(stage):
            print(f"[reproduce] {stage.name}: done before (exit {state.stages[stage.name]['exit']}); skipped",
                  flush=True)
            continue
        print(f"[reproduce] {stage.name}: entrypoint.sh {' '.join(stage.argv)}", flush=True)
        state.record(stage, "running", started_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        started = time.monotonic()
        code = run_stage(entrypoint, stage, env)
        seconds = round(time.monotonic() - started, 1)
        if code not in stage.verdicts:
            state.record(stage, "failed", exit=code, seconds=seconds)
            print(f"[reproduce] {stage.name} failed (exit {code}) after {seconds} s; run the same command "
                  f"again to go on from {stage.name} (the stages before it are kept)", file=sys.stderr, flush=True)
            return code
        state.record(stage, "done", exit=code, seconds=seconds)
        print(f"[reproduce] {stage.name}: done in {seconds} s", flush=True)
    verdict = state.stages["expect"]["exit"]
    print(f"[reproduce] {run.name} on {run.profile.name}: expected result "
          f"{'met' if verdict == 0 else 'MISSED'} ({run.log_dir / 'expect.json'}; report: "
          f"{reports_dir / run.name / 'report.html'})", flush=True)
    return verdict

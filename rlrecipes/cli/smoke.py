"""`rlrecipes smoke`: the GPU smoke run (rlrecipes/smoke/run.py launches and checks it)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from rlrecipes.fsutil import atomic_write_text
from rlrecipes.smoke.run import (SMOKE_RECIPES, Check, check_patch, default_work_dir, detect_profile, format_table,
                                 smoke_recipe)


def smoke_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--work", type=Path, default=None,
                        help="working directory: assets/, checkpoints/, logs/, merged/, summary.json "
                             "(default: $SMOKE_DIR, else /workspace/smoke where /workspace is writable, "
                             "else runs/smoke); the run's own checkpoints there are deleted first")
    parser.add_argument("--assets", type=Path, default=None,
                        help="smoke-assets output to use (default: build it under WORK/assets)")
    parser.add_argument("--recipe", action="append", choices=SMOKE_RECIPES, default=None,
                        help="run only this smoke recipe (repeatable; default: all)")
    parser.add_argument("--profile", default=None,
                        help="profile to run on (default: any-1gpu-hopper in the Hopper image, any-1gpu-vllm where "
                             "vLLM is installed, else any-1gpu)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per launch before it is killed")
    parser.add_argument("--quiet", action="store_true", help="do not echo training output")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every launch")


def smoke(args: argparse.Namespace) -> int:
    from rlrecipes.smoke.assets import build_assets

    work = (args.work or default_work_dir()).resolve()
    work.mkdir(parents=True, exist_ok=True)
    profile = args.profile or detect_profile()
    python = sys.executable
    assets = build_assets(args.assets or work / "assets")
    checks: list[Check] = []
    timings = []
    if profile == "any-1gpu":
        checks.append(check_patch(python))
    for name in args.recipe or SMOKE_RECIPES:
        recipe_checks, timing = smoke_recipe(name, profile, work, assets, python,
                                             None if args.quiet else sys.stdout, args.timeout, args.overrides)
        checks += recipe_checks
        timings.append(timing)
    summary = {"profile": profile, "passed": all(c.ok for c in checks), "checks": [asdict(c) for c in checks],
               "launches": timings}
    atomic_write_text(work / "summary.json", json.dumps(summary, indent=2) + "\n")
    print(format_table(checks))
    print(f"summary: {work / 'summary.json'}")
    return 0 if summary["passed"] else 1

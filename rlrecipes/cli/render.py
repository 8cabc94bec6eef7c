"""`rlrecipes render RECIPE --out DIR`: a run directory (resolved verl config, launch script, manifest)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rlrecipes.cli.arguments import recipe_arguments, resolve_recipe
from rlrecipes.errors import EXIT_INVALID


def render_arguments(parser: argparse.ArgumentParser) -> None:
    recipe_arguments(parser)
    parser.add_argument("--out", required=True, type=Path, help="run directory to write")
    parser.add_argument("--force", action="store_true",
                        help="overwrite config.yaml, train.sh and manifest.json if --out already has them")
    parser.add_argument("--no-validate", action="store_true",
                        help="skip validation against verl (config.yaml then holds the overrides only)")


def render(args) -> int:
    from rlrecipes.recipe.render import check_run_dir, render_run_dir
    from rlrecipes.recipe.validate import validate_runs

    run = resolve_recipe(args)
    check_run_dir(args.out, args.force, run)  # before the validation's seconds
    config = None
    if not args.no_validate:
        (result,) = validate_runs([run])
        if not result.ok:
            print(result.describe(), file=sys.stderr)
            return EXIT_INVALID
        config = result.config
    for path in render_run_dir(run, args.out, args.overrides, config, force=args.force):
        print(f"wrote {path}")
    return 0

"""`rlrecipes stage STAGE [ARGS...]`: one stage of a run, the way the images' entry point runs it (the stage
engine is rlrecipes/launch/stages.py; its docstring lists the stages)."""

from __future__ import annotations

import argparse
import os

from rlrecipes.errors import RecipeError
from rlrecipes.launch.stages import STAGES
from rlrecipes.process import stop_latch


def stage_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--recipe", default=os.environ.get("RECIPE", ""),
                        help="recipe name (default: $RECIPE, as the images and compose.yaml set it)")
    parser.add_argument("--profile", "-p", default=os.environ.get("PROFILE", ""),
                        help="hardware profile (default: $PROFILE; empty: the recipe's own)")
    parser.add_argument("stage", choices=STAGES, help="the stage to run")
    parser.add_argument("args", nargs="*", metavar="ARG",
                        help="Hydra overrides (run, train, resume) or, after --, the stage command's own options "
                             "(rlrecipes stage preflight -- --json)")


def stage(args: argparse.Namespace) -> int:
    from rlrecipes.cli import main
    from rlrecipes.launch.stages import Stages
    from rlrecipes.recipe.load import resolve

    rest = list(args.args)
    if not args.recipe:
        if args.stage == "eval":  # no recipe: no fast check on its validation file, lm-eval alone
            return main(["eval", *rest])
        raise RecipeError("no recipe: set RECIPE (e.g. RECIPE=qwen2.5-0.5b-gsm8k-ppo) or pass --recipe",
                          where=f"stage {args.stage}", hint="list them with: rlrecipes recipes")
    overrides = rest if args.stage in ("run", "train", "resume") else []
    run = resolve(args.recipe, profile=args.profile or None, overrides=overrides)
    with stop_latch():  # a stop between two of the stage's children is said and reported as one within them
        return Stages(run).dispatch(args.stage, rest)

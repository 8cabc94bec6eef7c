"""What the commands that take a recipe share: `RECIPE [--profile P] [key=value ...]`, parsed and resolved
the same way everywhere."""

from __future__ import annotations

import argparse


def recipe_arguments(parser: argparse.ArgumentParser, recipe_required: bool = True, recipe_help: str | None = None
                     ) -> None:
    """RECIPE (optional when not recipe_required), --profile/-p and the key=value overrides after them."""
    parser.add_argument("recipe", nargs=None if recipe_required else "?",
                        help=recipe_help or "recipe name: its path under recipes/ without .yaml (see `rlrecipes recipes`)")
    parser.add_argument("--profile", "-p", help="hardware profile (default: the recipe's own)")
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="Hydra-style verl overrides, e.g. trainer.total_epochs=15")


def resolve_recipe(args: argparse.Namespace, env: dict[str, str] | None = None):
    """The ResolvedRun that recipe_arguments' RECIPE, --profile and overrides name (its folders from `env`, by
    default this process's environment)."""
    from rlrecipes.recipe.load import resolve

    return resolve(args.recipe, profile=args.profile, overrides=args.overrides, env=env)

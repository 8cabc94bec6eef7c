"""`rlrecipes validate RECIPE` (or `--all`): the composed verl config checked by the verl the profile's image pins."""

from __future__ import annotations

import argparse
import json
import sys

from rlrecipes.cli.arguments import recipe_arguments, resolve_recipe
from rlrecipes.errors import EXIT_INVALID, RecipeError


def validate_arguments(parser: argparse.ArgumentParser) -> None:
    recipe_arguments(parser, recipe_required=False)
    parser.add_argument("--all", action="store_true",
                        help="validate every shipped recipe on every profile it lists")
    parser.add_argument("--json", action="store_true", help="machine-readable result")


def validate(args) -> int:
    from rlrecipes.recipe.load import list_recipes, load_recipe, resolve
    from rlrecipes.recipe.validate import validate_runs

    if args.all:
        runs = [resolve(name, profile=p) for name in list_recipes() for p in load_recipe(name).profiles]
    elif args.recipe:
        runs = [resolve_recipe(args)]
    else:
        raise RecipeError("name a recipe or pass --all", hint="rlrecipes recipes  # lists them")
    results = validate_runs(runs)
    if args.json:
        json.dump([{"recipe": r.run.name, "profile": r.run.profile.name, "verl": r.verl, "ok": r.ok,
                    "kind": r.kind, "key": r.key, "message": r.message, "suggestions": r.suggestions}
                   for r in results], sys.stdout, indent=2)
        print()
    else:
        for result in results:
            for warning in result.run.warnings:
                print(f"warn  {result.run.name}: {warning}", file=sys.stderr)
            print(result.describe())
    return 0 if all(r.ok for r in results) else EXIT_INVALID

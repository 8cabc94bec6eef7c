"""`rlrecipes recipes`: the shipped recipes and profiles."""

from __future__ import annotations

import argparse
import json


def list_recipes_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true",
                        help="machine-readable: {recipes: [{name, description, path, profiles}], profiles: [...]}")


def list_recipes(args) -> int:

    from rlrecipes.paths import repo_root
    from rlrecipes.recipe.load import list_profiles, load_profile, load_recipe
    from rlrecipes.recipe.load import list_recipes as names

    recipes = [load_recipe(name) for name in names()]
    profiles = [load_profile(name) for name in list_profiles()]
    if args.json:
        def rel(path) -> str:
            return path.relative_to(repo_root()).as_posix() if path.is_relative_to(repo_root()) else str(path)

        print(json.dumps({
            "recipes": [{"name": r.name, "description": r.description, "path": rel(r.path), "profile": r.profile,
                         "profiles": list(r.profiles)} for r in recipes],
            "profiles": [{"name": p.name, "description": p.description, "path": rel(p.path), "image": p.image_name,
                          "verl": p.image.verl, "gpus": p.n_gpus, "gpu": p.gpu.name} for p in profiles],
        }, indent=2))
        return 0
    from rich.table import Table

    from rlrecipes import ui

    # the terminal's width (80 when piped): names stay whole, the other columns wrap at word boundaries
    console = ui.console()
    table = Table(title="recipes (recipes/<name>.yaml)", title_justify="left")
    table.add_column("recipe", style="bold", no_wrap=True)
    table.add_column("what it trains", overflow="fold")
    table.add_column("profiles", overflow="fold")
    for recipe in recipes:
        table.add_row(recipe.name, recipe.description, ", ".join(recipe.profiles))
    console.print(table)
    table = Table(title="profiles (recipes/profiles/<name>.yaml)", title_justify="left")
    table.add_column("profile", style="bold", no_wrap=True)
    table.add_column("hardware", overflow="fold")
    table.add_column("image", no_wrap=True)
    table.add_column("verl", no_wrap=True)
    for profile in profiles:
        table.add_row(profile.name, profile.description, profile.image_name, profile.image.verl)
    console.print(table)
    return 0

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
    print("recipes (recipes/<name>.yaml):")
    for recipe in recipes:
        print(f"  {recipe.name:34s} {recipe.description}  [profiles: {', '.join(recipe.profiles)}]")
    print("profiles (recipes/profiles/<name>.yaml):")
    for profile in profiles:
        print(f"  {profile.name:34s} {profile.description}  [image {profile.image_name}, verl {profile.image.verl}]")
    return 0

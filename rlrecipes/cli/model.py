"""`rlrecipes model RECIPE`: the recipe's base model in the models directory (rlrecipes/data/model_download.py)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rlrecipes.data.model_download import assets_command, ensure_model
from rlrecipes.errors import RecipeError


def model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("recipe", help="recipe name (recipes/<name>.yaml); its model.hub_id is downloaded")
    parser.add_argument("--models-dir", type=Path, default=Path(os.environ.get("MODELS_DIR", "/workspace/models")),
                        metavar="DIR", help="where models live (default: $MODELS_DIR or /workspace/models)")
    parser.add_argument("--revision", default="main", help="branch, tag or commit on the hub (default: main)")
    parser.add_argument("--force", action="store_true", help="download again even if the model is complete")


def model(args: argparse.Namespace) -> int:
    from rlrecipes.recipe.load import load_recipe

    recipe = load_recipe(args.recipe)
    hub_id, dir_name = recipe.model.hub_id, recipe.model.dir_name
    target = args.models_dir / dir_name
    if recipe.assets:  # smoke-assets / canary-assets build it; the hub has no such model
        if (target / "config.json").is_file():
            print(f"model: {hub_id} already at {target} (built by `rlrecipes {recipe.assets}`)")
            return 0
        from rlrecipes.recipe.load import resolve

        run = resolve(args.recipe, env={**os.environ, "MODELS_DIR": str(args.models_dir)})
        raise RecipeError(f"{hub_id} is built offline by `rlrecipes {recipe.assets}`, never downloaded",
                          where=str(target), hint=assets_command(run))
    source = ensure_model(hub_id, args.revision, target, force=args.force)
    if source is None:
        print(f"model: {hub_id} already at {target} (--force downloads again)")
        return 0
    print(f"model: {hub_id} ({args.revision}) ready at {target} [{source}]")
    return 0

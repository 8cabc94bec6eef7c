"""`rlrecipes cluster`: the Ray cluster checked against a recipe's needs (rlrecipes/launch/cluster.py)."""

from __future__ import annotations

import argparse
import json
import sys

from rlrecipes.cli.arguments import recipe_arguments, resolve_recipe
from rlrecipes.errors import EXIT_FAILED, RecipeError
from rlrecipes.launch.cluster import check_cluster


def cluster_arguments(parser: argparse.ArgumentParser) -> None:
    recipe_arguments(parser, recipe_required=False,
                     recipe_help="recipe to check against the cluster (omit: list nodes only)")
    parser.add_argument("--address", help="Ray cluster address (default: $RAY_ADDRESS)")
    parser.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                        help="wait up to SECONDS for enough nodes to join (Slurm: workers start after the head)")
    parser.add_argument("--json", action="store_true", help="machine-readable report")


def cluster(args) -> int:
    run = None
    if args.recipe:
        run = resolve_recipe(args)
    elif args.overrides:
        raise RecipeError("overrides need a recipe", hint="rlrecipes cluster RECIPE key=value ...")
    report = check_cluster(run, address=args.address, wait_s=args.wait)
    if args.json:
        json.dump(report.as_dict(), sys.stdout, indent=2, default=str)
        print()
    else:
        print(report.describe())
    return 0 if report.ok else EXIT_FAILED

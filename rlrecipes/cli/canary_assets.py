"""`rlrecipes canary-assets`: the learning canary's warm-started model and data (rlrecipes/smoke/canary.py)."""

from __future__ import annotations

import argparse

from rlrecipes.cli.smoke_assets import asset_dir_arguments
from rlrecipes.smoke.assets import asset_dirs
from rlrecipes.smoke.canary import build_canary


def canary_assets_arguments(parser: argparse.ArgumentParser) -> None:
    asset_dir_arguments(parser)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train-rows", type=int, default=4096, help="RL prompts")
    parser.add_argument("--test-rows", type=int, default=512, help="held-out problems (the contract needs >= 500)")
    parser.add_argument("--sft-rows", type=int, default=60000, help="warm-start problems (their own seed)")
    parser.add_argument("--band", type=float, nargs=2, default=(0.10, 0.40), metavar=("LOW", "HIGH"),
                        help="the start band: the held-out greedy accuracy the warm-started model must have, the "
                             "canary contracts' 'accuracy before' (default 0.10 0.40); outside it nothing is written")
    parser.add_argument("--stop-at", type=float, default=0.15, metavar="ACC",
                        help="greedy dev accuracy at which the warm start stops (default 0.15: above the band's floor, "
                             "since 256 dev problems can read a few points off the held-out ones)")
    parser.add_argument("--sft-lr", type=float, default=1e-3)
    parser.add_argument("--sft-steps", type=int, default=2000, help="most SFT steps before giving up")
    parser.add_argument("--eval-every", type=int, default=25, help="SFT steps between dev checks")
    parser.add_argument("--dev-rows", type=int, default=256)
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")


def canary_assets(args: argparse.Namespace) -> int:
    manifest = build_canary(args.out, models_dir=args.models_dir, data_dir=args.data_dir, seed=args.seed,
                            train_rows=args.train_rows, test_rows=args.test_rows,
                            sft_rows=args.sft_rows, band=tuple(args.band), stop_at=args.stop_at, lr=args.sft_lr,
                            max_steps=args.sft_steps,
                            eval_every=args.eval_every, dev_rows=args.dev_rows, force=args.force)
    models_dir, data_dir = asset_dirs(args.out, args.models_dir, args.data_dir)
    print(f"start accuracy {manifest['start']['accuracy']:.3f} (held-out, greedy, n={manifest['start']['n']})")
    print(f"export MODELS_DIR={models_dir} DATA_DIR={data_dir}")
    return 0

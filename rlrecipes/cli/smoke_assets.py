"""`rlrecipes smoke-assets`: the offline smoke assets -- a tiny Qwen2 model, its tokenizer, GSM8K-shaped
parquet (rlrecipes/smoke/assets.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rlrecipes.plan.architectures import ARCHITECTURES
from rlrecipes.smoke.assets import build_assets


def asset_dir_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, help="directory to write models/ and data/ into")
    parser.add_argument("--models-dir", type=Path, help="write the model here instead of OUT/models")
    parser.add_argument("--data-dir", type=Path, help="write the data here instead of OUT/data")


def smoke_assets_arguments(parser: argparse.ArgumentParser) -> None:
    asset_dir_arguments(parser)
    parser.add_argument("--arch", default="tiny", choices=sorted(ARCHITECTURES),
                        help="model shape: tiny (default, seconds on CPU) or a real model's architecture with "
                             "random weights, for memory and speed measurement")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data, tokenizer corpus and weights")
    parser.add_argument("--train-rows", type=int, default=256)
    parser.add_argument("--test-rows", type=int, default=64)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"],
                        help="dtype of the saved weights (the Qwen2.5 hub checkpoints are bfloat16)")
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")


def smoke_assets(args: argparse.Namespace) -> int:
    result = build_assets(args.out, args.arch, args.seed, args.train_rows, args.test_rows, args.force,
                          dtype=args.dtype, models_dir=args.models_dir, data_dir=args.data_dir)
    print(f"export MODELS_DIR={result['models_dir']} DATA_DIR={result['data_dir']}")
    return 0

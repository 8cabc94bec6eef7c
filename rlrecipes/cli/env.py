"""`rlrecipes env`: the environment block a bug report needs (rlrecipes/preflight/envinfo.py collects it)."""

from __future__ import annotations

import argparse
import json

from rlrecipes.preflight.envinfo import collect, format_block


def env_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable")
    parser.add_argument("--gpu-inventory", metavar="FILE.json", help="report these GPUs instead of detecting them")


def env(args) -> int:
    from rlrecipes.preflight.inventory import load_inventory

    info = collect(load_inventory(args.gpu_inventory) if args.gpu_inventory else None)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print(format_block(info))
    return 0

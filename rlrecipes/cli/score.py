"""`rlrecipes score FILE`: saved generations scored with the training scorer, per mode
(rlrecipes/rewards/generations.py reads them)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rlrecipes.rewards.generations import GROUND_TRUTH_KEYS, RESPONSE_KEYS, read_records, score_records


def score_arguments(parser: argparse.ArgumentParser) -> None:
    from rlrecipes.rewards.gsm8k import MODES

    parser.add_argument("path", metavar="PARQUET_OR_JSONL", help="saved generations (.jsonl, .json lines or .parquet)")
    parser.add_argument("--mode", choices=MODES, action="append", help="score only these modes (repeatable; default: all)")
    parser.add_argument(
        "--response-key", metavar="KEY", help=f"response field (default: first of {', '.join(RESPONSE_KEYS)})"
    )
    parser.add_argument(
        "--ground-truth-key", metavar="KEY", help=f"ground-truth field (default: first of {', '.join(GROUND_TRUTH_KEYS)})"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")


def score(args: argparse.Namespace) -> int:
    from rlrecipes.rewards.gsm8k import MODES

    path = Path(args.path)
    modes = tuple(dict.fromkeys(args.mode)) if args.mode else MODES
    result = score_records(read_records(path), modes, args.response_key, args.ground_truth_key, where=str(path))
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
        return 0
    print(f"{path}: {result['responses']} responses ({result['response_key']} vs {result['ground_truth_key']})")
    # accuracy = the reward (answer right in the mode's format); answer ok ignores the format (think).
    print(f"  {'mode':<10} {'accuracy':>9} {'format ok':>10} {'answer ok':>10}")
    for mode, figures in result["modes"].items():
        print(f"  {mode:<10} {figures['score']:>9.4f} {figures['format']:>10.4f} {figures['acc']:>10.4f}")
    for name, value in result.get("lm_eval_exact_match", {}).items():
        print(f"  lm-eval {name}: {value:.4f} (as lm-eval scored it)")
    return 0

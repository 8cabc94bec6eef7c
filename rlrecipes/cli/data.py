"""`rlrecipes data gsm8k`: load GSM8K, write verl parquet files and a manifest."""

from __future__ import annotations

import argparse

from rlrecipes.errors import RecipeError

DATASETS = ("gsm8k",)


def data_arguments(parser: argparse.ArgumentParser) -> None:
    from rlrecipes.data.gsm8k import TEMPLATES

    parser.add_argument("dataset", choices=DATASETS, help="which dataset to prepare")
    parser.add_argument(
        "--source",
        nargs="+",
        default=["openai/gsm8k"],
        metavar="HUB_ID|PATH",
        help="hub id (config 'main'), a local dataset directory, or train*/test* .jsonl/.parquet files "
        "(default: openai/gsm8k)",
    )
    parser.add_argument(
        "--out", required=True, metavar="DIR", help="output directory (train.parquet, test.parquet, manifest.json)"
    )
    parser.add_argument(
        "--template",
        choices=TEMPLATES,
        default="verl",
        help="prompt instruction: verl's '#### answer' (default) or think (<think>...</think> then '#### answer')",
    )
    parser.add_argument(
        "--tokenizer", metavar="MODEL_DIR", help="tokenizer used to measure prompts (with --max-prompt-length)"
    )
    parser.add_argument(
        "--max-prompt-length",
        type=int,
        metavar="N",
        help="drop prompts longer than N tokens after the chat template (needs --tokenizer)",
    )
    parser.add_argument("--skip-bad", action="store_true", help="skip rows without a question or '#### answer' (counted)")
    parser.add_argument("--json", action="store_true", help="print the manifest as JSON")


def data(args: argparse.Namespace) -> int:
    import json

    from rlrecipes.data.gsm8k import load_source, write_dataset

    if args.dataset != "gsm8k":  # argparse choices already guard this; kept for direct callers
        raise RecipeError(f"unknown dataset {args.dataset!r}", where="dataset")
    rows = load_source(args.source)
    manifest = write_dataset(
        rows,
        args.out,
        template=args.template,
        source=" ".join(args.source),
        tokenizer=args.tokenizer,
        max_prompt_length=args.max_prompt_length,
        skip_bad=args.skip_bad,
    )
    if args.json:
        print(json.dumps(manifest, indent=2, sort_keys=True))
        return 0
    print(f"wrote {args.out} (template {manifest['template']}, source {manifest['source']})")
    for split, info in manifest["splits"].items():
        print(
            f"  {info['file']:<14} {info['rows']:>6} rows  (read {info['input_rows']}, "
            f"skipped bad {info['skipped_bad']}, dropped too long {info['dropped_too_long']})  "
            f"sha256 {info['sha256'][:12]}"
        )
    return 0

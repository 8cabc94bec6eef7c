"""`rlrecipes merge RUN_DIR`: a checkpoint merged into a Hugging Face model (rlrecipes/after/merge.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rlrecipes.after.merge import DTYPES, merge_checkpoint
from rlrecipes.after.merge_info import MergeInfo
from rlrecipes.verl.checkpoint_ref import locate_checkpoint
from rlrecipes.verl.checkpoints import STEP_DIR_PATTERN


def merge_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", help=f"the run's checkpoint directory (CKPT_DIR/<recipe>), a {STEP_DIR_PATTERN} "
                                        "directory, or its actor/ directory")
    parser.add_argument("--step", default="latest", help="step to merge: N or 'latest' (the tracker; default)")
    parser.add_argument("--out", required=True, help="output directory for the Hugging Face model")
    parser.add_argument("--recipe", help="recipe name (dtype, LoRA alpha, base model, logs); default: RUN_DIR's "
                                         "name when it is a recipe")
    parser.add_argument("--base", type=Path, help="base model directory (LoRA runs; default: from the checkpoint "
                                                  "or the recipe)")
    parser.add_argument("--dtype", choices=["auto", *DTYPES], default="auto",
                        help="weights dtype (default: the recipe's; else the checkpoint config's)")
    parser.add_argument("--lora-alpha", type=float, help="override the LoRA alpha training used")
    parser.add_argument("--log-dir", type=Path, help="the run's log directory, for the model card's metrics")
    parser.add_argument("--device", default="auto",
                        help="device for the verification generation: auto (cuda when available), cpu, cuda:0")
    parser.add_argument("--force", action="store_true", help="replace --out if it exists")


def merge(args: argparse.Namespace) -> int:
    ckpt = locate_checkpoint(args.run_dir, args.step)
    out = Path(args.out)
    info = merge_checkpoint(ckpt, out, base=args.base, dtype=args.dtype, lora_alpha=args.lora_alpha,
                            recipe=args.recipe, log_dir=args.log_dir, force=args.force, device=args.device)
    _print_summary(info, out)
    return 0


def _print_summary(info: MergeInfo, out: Path) -> None:
    v = info.verification
    rows = [("Output", str(out)), ("Checkpoint", f"{info.checkpoint} (step {info.step})"),
            ("Recipe", info.recipe or "-"), ("Weights", info.dtype), ("Base model", info.base_model or "-")]
    if info.lora:
        lora = info.lora
        rows += [("LoRA fused", f"r={lora.r} alpha={lora.alpha:g} ({lora.alpha_source}); "
                                f"{lora.modules} modules: {', '.join(lora.targets)}"),
                 ("Changed vs base", f"{v.get('changed_targeted')} LoRA-targeted tensors (max |delta| "
                                     f"{v.get('max_abs_delta', 0):.3g}); {v.get('changed_other')} others")]
    elif "compared" in v:
        rows.append(("Changed vs base", f"{v['changed_targeted'] + v['changed_other']} of {v['compared']} tensors"))
    for key, value in info.metrics.items():
        rows.append((key, f"{value:.4f}"))
    rows += [("Greedy sample", repr(v["sample"][:80])), ("Time", f"{info.seconds} s")]
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print("merged model ready")
        for key, value in rows:
            print(f"  {key}: {value}")
        return
    table = Table(title="merged model ready", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for key, value in rows:
        table.add_row(key, value)
    Console().print(table)

"""`rlrecipes eval MODEL`: lm-eval and the fast check on a model (rlrecipes/after/evaluate.py).

--out is never an input (the model, the baseline, the stored results, the fast-eval parquet, the task
folder) nor a folder holding one (exit 2); a folder inside the model's, MODEL/eval (the default), is fine.
eval-summary.json is written last, atomically.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

from rlrecipes.after.evaluate import (DEFAULT_TASKS, SUMMARY_FILE, baseline_from_merge_info, dtype_from_merge_info,
                                      eval_table, lm_eval_command, load_results, pick_backend, run_lm_eval,
                                      summary_cells)
from rlrecipes.errors import RecipeError
from rlrecipes.fsutil import Input, atomic_write_text, refuse_overwrite
from rlrecipes.rewards.accuracy import fast_eval


def evaluate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="merged model directory (or, with --from-results, its lm-eval output)")
    parser.add_argument("--baseline", help="base model directory to compare against (default: the base_model "
                                           "in MODEL/merge-info.json written by `rlrecipes merge`)")
    parser.add_argument("--no-baseline", action="store_true", help="evaluate MODEL alone")
    parser.add_argument("--tasks", default=",".join(DEFAULT_TASKS), help="lm-eval tasks (default: %(default)s)")
    parser.add_argument("--backend", choices=["auto", "vllm", "hf"], default="auto",
                        help="lm-eval model backend: vllm (A100 image), hf (P40 image); auto picks vllm if installed")
    parser.add_argument("--out", help="output directory (default: MODEL/eval)")
    parser.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float32", "float16"],
                        help="dtype for both models (bfloat16|float32|float16); auto: the dtype `rlrecipes merge` "
                             "saved MODEL in (the recipe's: float32 on P40s), else each model's config")
    parser.add_argument("--limit", type=int, help="evaluate only the first N problems per task (quick look)")
    parser.add_argument("--batch-size", default="auto", help="lm-eval batch size (default: %(default)s)")
    parser.add_argument("--apply-chat-template", action="store_true",
                        help="prompt through the model's chat template (multi-turn few-shot)")
    parser.add_argument("--tensor-parallel-size", type=int, default=1, help="vLLM tensor parallel size")
    parser.add_argument("--include-path", metavar="DIR",
                        help="extra lm-eval task YAMLs; a task here replaces the built-in task of the same name "
                             "(e.g. gsm8k from local files on a machine without the dataset hub)")
    parser.add_argument("--device", help="lm-eval --device for the hf backend (e.g. cpu, cuda:0)")
    parser.add_argument("--gen-kwargs", help="lm-eval --gen_kwargs, e.g. max_gen_toks=512 (default: the task's)")
    parser.add_argument("--fast-data", metavar="PARQUET",
                        help="also run the fast in-repo eval on this verl GSM8K test parquet")
    parser.add_argument("--fast-limit", type=int, help="problems for the fast eval (default: all)")
    parser.add_argument("--max-new-tokens", type=int, default=512, help="fast eval generation length")
    parser.add_argument("--fast-batch-size", type=int, default=8, help="fast eval prompts per generate call")
    parser.add_argument("--skip-lm-eval", action="store_true", help="run only the fast eval")
    parser.add_argument("--from-results", action="store_true",
                        help="MODEL and --baseline are lm-eval output dirs/results files: only print the table")


def _render_table(summary: dict) -> None:
    header, cells = summary_cells(summary)
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(" | ".join(header))
        for row in cells:
            print(" | ".join(row))
        return
    table = Table(title="GSM8K exact_match (lm-eval)")
    for name in header:
        table.add_column(name, justify="left" if name in ("task", "filter") else "right")
    for row in cells:
        table.add_row(*row)
    Console().print(table)


def eval_inputs(args: argparse.Namespace) -> list[Input]:
    stored = args.from_results
    return [Input("the lm-eval results" if stored else "the model", args.model),
            Input("the baseline's lm-eval results" if stored else "the baseline model", args.baseline),
            Input("the fast-eval data", args.fast_data), Input("the lm-eval task folder", args.include_path)]


def evaluate(args: argparse.Namespace) -> int:
    tasks = tuple(t.strip() for t in args.tasks.split(",") if t.strip())
    if not tasks:
        raise RecipeError("no tasks given", where="--tasks")
    if args.no_baseline:
        args.baseline = None
    elif args.baseline is None and not args.from_results:
        args.baseline = baseline_from_merge_info(Path(args.model))
    out = Path(args.out) if args.out else Path(args.model) / "eval"
    refuse_overwrite("--out", out, eval_inputs(args), hint="write the evaluation beside the model, e.g. MODEL/eval")
    dtype = args.dtype
    if dtype == "auto" and not args.from_results:
        dtype = dtype_from_merge_info(Path(args.model)) or "auto"
    started = time.monotonic()
    summary: dict = {"tasks": list(tasks), "model": args.model, "baseline": args.baseline, "dtype": dtype,
                     "rows": [], "fast_eval": {}}
    trained = baseline = None
    if args.from_results:
        trained = load_results(args.model)
        baseline = load_results(args.baseline) if args.baseline else None
    elif not args.skip_lm_eval:
        for path in [args.model] + ([args.baseline] if args.baseline else []):
            if not Path(path).is_dir():
                raise RecipeError("model directory not found", where=path)
            if not (Path(path) / "config.json").is_file():
                raise RecipeError("not a Hugging Face model directory (no config.json)", where=path,
                                  hint="pass the directory `rlrecipes merge` or `rlrecipes model` wrote")
        backend = pick_backend(args.backend)
        summary["backend"] = backend
        runs = [("trained", args.model)] + ([("baseline", args.baseline)] if args.baseline else [])
        for label, model in runs:
            target = out / "lm_eval" / label
            cmd = lm_eval_command(model, tasks, backend, target, dtype=dtype, limit=args.limit,
                                  batch_size=args.batch_size, apply_chat_template=args.apply_chat_template,
                                  tensor_parallel_size=args.tensor_parallel_size,
                                  include_path=args.include_path, device=args.device, gen_kwargs=args.gen_kwargs)
            summary.setdefault("commands", {})[label] = cmd
            run_lm_eval(cmd, out / "lm_eval" / f"{label}.log", label)
        trained = load_results(out / "lm_eval" / "trained")
        baseline = load_results(out / "lm_eval" / "baseline") if args.baseline else None
    if trained is not None:
        rows = eval_table(trained, baseline, tasks)
        summary["rows"] = [dict(asdict(r), delta=r.delta) for r in rows]
        summary["results_files"] = {"trained": trained.path, "baseline": baseline.path if baseline else None}
    if args.fast_data:
        runs = [("trained", args.model)] + ([("baseline", args.baseline)] if args.baseline else [])
        for label, model in runs:
            summary["fast_eval"][label] = fast_eval(
                model, args.fast_data, limit=args.fast_limit, max_new_tokens=args.max_new_tokens, dtype=dtype,
                batch_size=args.fast_batch_size,
                out_file=out / "fast_eval" / f"{label}.jsonl")
    summary["seconds"] = round(time.monotonic() - started, 1)
    write = not args.from_results or args.out is not None  # stored results: a summary only when asked
    if write:
        atomic_write_text(out / SUMMARY_FILE, json.dumps(summary, indent=2) + "\n")
    if summary["rows"]:
        _render_table(summary)
    for label, fast in summary["fast_eval"].items():
        print(f"fast eval ({label}): {100 * fast['accuracy']:.1f}% strict, {100 * fast['flexible_accuracy']:.1f}% "
              f"flexible on {fast['n']} problems of {fast['parquet']} ({fast['seconds']} s)")
    if write:
        print(f"wrote {out / SUMMARY_FILE}" + (f" and lm-eval outputs under {out / 'lm_eval'}" if trained else ""))
    return 0

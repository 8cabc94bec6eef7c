"""`rlrecipes eval`: lm-eval GSM8K numbers for a trained model against its base, plus a fast in-repo check.

The harness runs as its authors ship it (`python -m lm_eval run ...`): the vLLM backend in the A100 image,
the Hugging Face backend in the P40 image (no vLLM on sm_61). Its raw results and per-sample logs stay
under OUT/lm_eval/<label>/; the table here is a pure function of those results files, so it can be
re-printed from stored results (`--from-results`) and tested without a model.

The fast evaluation generates greedily with transformers over the GSM8K test parquet that training
validates on, and scores with the same function verl calls as the reward
(`rlrecipes.rewards.gsm8k.compute_score`), so the training reward and the eval metric can be compared.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rlrecipes.errors import RecipeError, StageFailed
from rlrecipes.fsutil import atomic_write_text
from rlrecipes.rewards.accuracy import fast_eval

DEFAULT_TASKS = ("gsm8k", "gsm8k_cot")
FILTERS = ("strict-match", "flexible-extract")
METRIC = "exact_match"
SUMMARY_FILE = "eval-summary.json"


# -- table logic: pure functions of lm-eval results files -------------------------------------------

@dataclass(frozen=True)
class TaskScore:
    value: float
    stderr: float | None
    n: int | None


@dataclass(frozen=True)
class EvalResults:
    path: str
    model: str
    scores: dict[str, dict[str, TaskScore]]  # task -> filter -> score


@dataclass(frozen=True)
class Row:
    task: str
    filter: str
    baseline: float | None
    trained: float | None
    n: int | None

    @property
    def delta(self) -> float | None:
        if self.baseline is None or self.trained is None:
            return None
        return self.trained - self.baseline


def find_results(path: str | Path) -> Path:
    """The lm-eval results file at `path` (a results_*.json, or the newest one under a directory)."""
    path = Path(path)
    if path.is_file():
        return path
    if path.is_dir():
        found = sorted(path.rglob("results_*.json"), key=lambda p: (p.name, p.stat().st_mtime))
        if found:
            return found[-1]
    raise RecipeError("no lm-eval results file (results_*.json)", where=str(path),
                      hint="pass the --output_path of an lm-eval run or one results_*.json")


def _number(value) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value):
        return float(value)
    return None  # lm-eval writes "N/A" for an undefined stderr


def parse_results(data: dict, path: str = "<memory>") -> EvalResults:
    """Scores `exact_match,<filter>` per task from lm-eval's results JSON."""
    if not isinstance(data.get("results"), dict):
        raise RecipeError("not an lm-eval results file: no 'results' object", where=path)
    n_samples = data.get("n-samples", {})
    scores: dict[str, dict[str, TaskScore]] = {}
    for task, metrics in data["results"].items():
        if not isinstance(metrics, dict):
            continue
        n = n_samples.get(task, {}).get("effective") if isinstance(n_samples.get(task), dict) else None
        for key, raw in metrics.items():
            name, sep, filt = key.partition(",")
            if name != METRIC or not sep:
                continue
            value = _number(raw)
            if value is None:
                continue
            stderr = _number(metrics.get(f"{METRIC}_stderr,{filt}"))
            scores.setdefault(task, {})[filt] = TaskScore(value, stderr, n)
    return EvalResults(path=path, model=model_of(data), scores=scores)


def model_of(data: dict) -> str:
    """The evaluated model: `pretrained=` of the model args (dict or string form), else lm-eval's model_name."""
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    args = config.get("model_args")
    if isinstance(args, dict) and args.get("pretrained"):
        return str(args["pretrained"])
    if isinstance(args, str):
        for part in args.split(","):
            key, _, value = part.partition("=")
            if key.strip() == "pretrained" and value:
                return value.strip()
    return str(data.get("model_name") or config.get("model") or "?")


def load_results(path: str | Path) -> EvalResults:
    file = find_results(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise RecipeError(f"unreadable lm-eval results JSON: {exc}", where=str(file)) from exc
    return parse_results(data, str(file))


def eval_table(trained: EvalResults, baseline: EvalResults | None = None,
               tasks: tuple[str, ...] | None = None) -> list[Row]:
    """One row per (task, filter) in either results; deltas where both have the number."""
    names = list(tasks) if tasks else sorted(set(trained.scores) | set(baseline.scores if baseline else {}))
    rows: list[Row] = []
    for task in names:
        mine = trained.scores.get(task, {})
        theirs = baseline.scores.get(task, {}) if baseline else {}
        filters = [f for f in FILTERS if f in mine or f in theirs]
        filters += sorted((set(mine) | set(theirs)) - set(FILTERS))
        for filt in filters:
            t, b = mine.get(filt), theirs.get(filt)
            rows.append(Row(task, filt, b.value if b else None, t.value if t else None,
                            (t or b).n if (t or b) else None))
    return rows


def table_cells(rows: list[Row], with_baseline: bool) -> tuple[list[str], list[list[str]]]:
    """Header and string cells (percent, one decimal) for Markdown, HTML and the terminal."""

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:.1f}"

    def signed(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:+.1f}"

    if with_baseline:
        header = ["task", "filter", "n", "base %", "trained %", "delta"]
        cells = [[r.task, r.filter, "-" if r.n is None else str(r.n), pct(r.baseline), pct(r.trained),
                  signed(r.delta)] for r in rows]
    else:
        header = ["task", "filter", "n", "exact_match %"]
        cells = [[r.task, r.filter, "-" if r.n is None else str(r.n), pct(r.trained)] for r in rows]
    return header, cells


def load_summary(path: str | Path) -> dict:
    """An eval-summary.json written by `rlrecipes eval` (path: the file or its directory)."""
    path = Path(path)
    file = path / SUMMARY_FILE if path.is_dir() else path
    if not file.is_file():
        raise RecipeError(f"no {SUMMARY_FILE}", where=str(path), hint="run `rlrecipes eval ... --out DIR` first")
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise RecipeError(f"unreadable eval summary: {exc}", where=str(file)) from exc


def fast_eval_cells(summary: dict) -> tuple[list[str], list[list[str]]]:
    """The fast in-repo eval (training reward on the GSM8K test parquet) as table cells."""
    header = ["model", "n", "strict % (the reward)", "flexible %"]
    cells = [[label, str(fast["n"]), f"{100 * fast['accuracy']:.1f}", f"{100 * fast['flexible_accuracy']:.1f}"]
             for label, fast in summary.get("fast_eval", {}).items()]
    return header, cells


def summary_cells(summary: dict) -> tuple[list[str], list[list[str]]]:
    rows = [Row(r["task"], r["filter"], r["baseline"], r["trained"], r.get("n")) for r in summary.get("rows", [])]
    return table_cells(rows, with_baseline=summary.get("baseline") is not None)


# -- running lm-eval --------------------------------------------------------------------------------

def pick_backend(requested: str) -> str:
    if requested != "auto":
        return requested
    if importlib.util.find_spec("vllm") is not None:
        return "vllm"
    return "hf"


def lm_eval_command(model: str, tasks: tuple[str, ...], backend: str, output_path: Path, *, dtype: str = "auto",
                    limit: int | None = None, batch_size: str = "auto", apply_chat_template: bool = False,
                    tensor_parallel_size: int = 1, gpu_memory_utilization: float = 0.8,
                    extra_model_args: str = "", include_path: str | None = None, device: str | None = None,
                    gen_kwargs: str | None = None, python: str | None = None) -> list[str]:
    """The lm-eval CLI call for one model (lm-eval 0.4.11's `run` subcommand)."""
    model_args = [f"pretrained={model}", f"dtype={dtype}"]
    if backend == "vllm":
        model_args += [f"tensor_parallel_size={tensor_parallel_size}",
                       f"gpu_memory_utilization={gpu_memory_utilization}"]
    if extra_model_args:
        model_args.append(extra_model_args)
    cmd = [python or sys.executable, "-m", "lm_eval", "run", "--model", backend,
           "--model_args", ",".join(model_args), "--tasks", ",".join(tasks),
           "--batch_size", str(batch_size), "--output_path", str(output_path), "--log_samples"]
    if limit is not None:
        cmd += ["--limit", str(limit)]
    if include_path:
        cmd += ["--include_path", str(include_path)]
    if device:
        cmd += ["--device", device]
    if gen_kwargs:
        cmd += ["--gen_kwargs", gen_kwargs]
    if apply_chat_template:
        cmd += ["--apply_chat_template", "--fewshot_as_multiturn"]
    return cmd


def run_lm_eval(cmd: list[str], log_file: Path, label: str) -> None:
    from rlrecipes.ui import run_logged

    code = run_logged(cmd, log_file, f"lm-eval {label}")
    if code != 0:
        tail = "\n".join(log_file.read_text(encoding="utf-8", errors="replace").splitlines()[-25:])
        raise StageFailed(f"lm-eval failed for {label} (exit {code}):\n{tail}", where=str(log_file))


# -- fast in-repo evaluation ------------------------------------------------------------------------

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


def dtype_from_merge_info(model: Path) -> str | None:
    """The dtype `rlrecipes merge` saved the model in (the recipe's), used for both models so that a P40
    (no bf16) evaluates in float32 and the baseline runs in the same precision as the trained model."""
    try:
        dtype = json.loads((model / "merge-info.json").read_text()).get("dtype")
    except (OSError, ValueError, AttributeError):
        return None
    return dtype if dtype in ("bfloat16", "float32", "float16") else None


def baseline_from_merge_info(model: Path) -> str | None:
    """The base model a merged model came from, when `rlrecipes merge` recorded a directory that exists
    (not the merger's bf16 copy it falls back to, which is gone after the merge)."""
    info_file = model / "merge-info.json"
    try:
        info = json.loads(info_file.read_text())
    except (OSError, ValueError):
        return None
    base = info.get("base_model") if isinstance(info, dict) else None
    if not base or "model_merger" in str(info.get("base_note", "")) or not (Path(base) / "config.json").is_file():
        return None
    print(f"baseline: {base} (from {info_file})")
    return str(base)


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


def evaluate(args: argparse.Namespace) -> int:
    tasks = tuple(t.strip() for t in args.tasks.split(",") if t.strip())
    if not tasks:
        raise RecipeError("no tasks given", where="--tasks")
    if args.no_baseline:
        args.baseline = None
    elif args.baseline is None and not args.from_results:
        args.baseline = baseline_from_merge_info(Path(args.model))
    out = Path(args.out) if args.out else Path(args.model) / "eval"
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

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

import importlib.util
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from rlrecipes.after.merge_info import DTYPES as MERGE_DTYPES, FILE as MERGE_INFO_FILE, MergeInfo
from rlrecipes.errors import RecipeError, StageFailed

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
    """An eval-summary.json written by `rlrecipes eval` (path: the file or its directory); RecipeError when it
    is missing, unreadable or not a JSON object."""
    path = Path(path)
    file = path / SUMMARY_FILE if path.is_dir() else path
    if not file.is_file():
        raise RecipeError(f"no {SUMMARY_FILE}", where=str(path), hint="run `rlrecipes eval ... --out DIR` first")
    try:
        summary = json.loads(file.read_text(encoding="utf-8"))
    except RecursionError as exc:
        raise RecipeError("unreadable eval summary: nested too deeply", where=str(file)) from exc
    except ValueError as exc:  # also a number too long to convert, bytes that are not UTF-8
        raise RecipeError(f"unreadable eval summary: {exc}", where=str(file)) from exc
    if not isinstance(summary, dict):
        raise RecipeError("an eval summary is a JSON object", where=str(file))
    return summary


@dataclass(frozen=True)
class FastEval:
    """One model's fast in-repo eval in a summary (`fast_eval.<label>`): its score on `n` problems."""

    label: str
    n: int
    accuracy: float
    flexible_accuracy: float | None


def _whole(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecipeError(f"{where} is not a whole number: {str(value)[:40]}", where=SUMMARY_FILE)
    if value > 2**53:
        raise RecipeError(f"{where} is too large", where=SUMMARY_FILE)
    return value


def _score(value, where: str) -> float:
    """A score as it was written: NaN, inf or 1.5 are kept, for the check that reads it to call them out."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RecipeError(f"{where} is not a number: {str(value)[:40]}", where=SUMMARY_FILE)
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def fast_evals(summary: dict) -> dict[str, FastEval]:
    """The `fast_eval` block of a summary, by model label; RecipeError where it is not what eval writes."""
    block = summary.get("fast_eval", {})
    if not isinstance(block, dict):
        raise RecipeError("fast_eval is not an object", where=SUMMARY_FILE)
    out: dict[str, FastEval] = {}
    for label, entry in block.items():
        at = f"fast_eval.{label}"
        if not isinstance(entry, dict):
            raise RecipeError(f"{at} is not an object", where=SUMMARY_FILE)
        flexible = entry.get("flexible_accuracy")
        out[label] = FastEval(label=label, n=_whole(entry.get("n"), f"{at}.n"),
                              accuracy=_score(entry.get("accuracy"), f"{at}.accuracy"),
                              flexible_accuracy=None if flexible is None else _score(flexible,
                                                                                     f"{at}.flexible_accuracy"))
    return out


def fast_eval_cells(summary: dict) -> tuple[list[str], list[list[str]]]:
    """The fast in-repo eval (training reward on the GSM8K test parquet) as table cells."""
    header = ["model", "n", "strict % (the reward)", "flexible %"]
    cells = [[fast.label, str(fast.n), f"{100 * fast.accuracy:.1f}",
              "-" if fast.flexible_accuracy is None else f"{100 * fast.flexible_accuracy:.1f}"]
             for fast in fast_evals(summary).values()]
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


def dtype_from_merge_info(model: Path) -> str | None:
    """The dtype `rlrecipes merge` saved the model in (the recipe's), used for both models so that a P40
    (no bf16) evaluates in float32 and the baseline runs in the same precision as the trained model."""
    info = MergeInfo.read(model)
    return info.dtype if info and info.dtype in MERGE_DTYPES.values() else None


def baseline_from_merge_info(model: Path) -> str | None:
    """The base model a merged model came from, when `rlrecipes merge` recorded a directory that exists
    (not the merger's bf16 copy it falls back to, which is gone after the merge)."""
    info = MergeInfo.read(model)
    base = info.base_model if info else None
    if not base or "model_merger" in str(info.base_note or "") or not (Path(base) / "config.json").is_file():
        return None
    print(f"baseline: {base} (from {model / MERGE_INFO_FILE})")
    return str(base)

"""`rlrecipes score FILE`: score saved generations with the training scorer, per mode.

Understands lm-eval sample files (`samples_gsm8k_*.jsonl`: `resps` + `target`, one line per doc and
filter), verl validation dumps (`output` + `gts`, written with `trainer.validation_data_dir`) and any
parquet/jsonl with a response column and a ground-truth column (`--response-key`, `--ground-truth-key`
take dotted paths such as `reward_model.ground_truth`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlrecipes.errors import RecipeError

RESPONSE_KEYS = ("resps", "output", "response", "responses", "solution_str", "completion", "generation")
GROUND_TRUTH_KEYS = ("gts", "ground_truth", "reward_model.ground_truth", "target", "answer", "doc.answer")


def read_records(path: Path) -> list[dict]:
    if not path.is_file():
        raise RecipeError("no such file", where=str(path))
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            return pq.read_table(path).to_pylist()
        except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ...
            raise RecipeError(f"cannot read parquet: {exc}", where=str(path)) from exc
    if suffix in (".jsonl", ".json"):
        records = []
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise RecipeError(f"invalid JSON: {exc.msg}", where=f"{path}:{lineno}") from exc
                if not isinstance(record, dict):
                    raise RecipeError("each line must be a JSON object", where=f"{path}:{lineno}")
                records.append(record)
        return records
    raise RecipeError(f"unsupported file type {suffix!r}", where=str(path), hint="use .jsonl or .parquet")


def _get(record: dict, dotted: str) -> Any:
    value: Any = record
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _pick_key(records: list[dict], explicit: str | None, candidates: tuple[str, ...], what: str, where: str) -> str:
    if explicit:
        if _get(records[0], explicit) is None:
            raise RecipeError(f"{what} key {explicit!r} not found in the first record", where=where)
        return explicit
    for key in candidates:
        if _get(records[0], key) is not None:
            return key
    raise RecipeError(
        f"no {what} field found (looked for {', '.join(candidates)}; the first record has {', '.join(records[0])})",
        where=where,
        hint=f"name it with --{what.replace(' ', '-')}-key",
    )


def _responses(value: Any) -> list[str]:
    # lm-eval keeps [[text]] per doc (one list per request); verl dumps keep a string.
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        out: list[str] = []
        for item in value:
            out.extend(_responses(item))
        return out
    return [] if value is None else [str(value)]


def _ground_truth(value: Any, where: str) -> str:
    from rlrecipes.data.gsm8k import extract_ground_truth
    from rlrecipes.rewards.gsm8k import normalize_number

    text = value if isinstance(value, str) else str(value)
    # A raw GSM8K answer (lm-eval's target, the dataset's answer) carries its number after "#### ".
    truth = extract_ground_truth(text) if "####" in text else text
    if truth is None or normalize_number(truth) is None:
        raise RecipeError(f"ground truth {text[-60:]!r} is not a number", where=where)
    return truth


def score_records(records: list[dict], modes, response_key=None, ground_truth_key=None, where="input") -> dict:
    from rlrecipes.rewards.gsm8k import compute_score

    if not records:
        raise RecipeError("no records", where=where)
    lm_eval_filters = None
    if "filter" in records[0] and "doc_id" in records[0]:
        # lm-eval logs every doc once per filter with the same responses: score one copy, keep the
        # per-filter exact_match lm-eval computed for comparison.
        lm_eval_filters = {}
        for rec in records:
            if isinstance(rec.get("exact_match"), (int, float)):
                lm_eval_filters.setdefault(rec["filter"], []).append(float(rec["exact_match"]))
        first = records[0]["filter"]
        records = [r for r in records if r.get("filter") == first]
    rkey = _pick_key(records, response_key, RESPONSE_KEYS, "response", where)
    gkey = _pick_key(records, ground_truth_key, GROUND_TRUTH_KEYS, "ground truth", where)
    totals = {m: {"acc": 0.0, "format": 0.0, "score": 0.0} for m in modes}
    n = 0
    for i, rec in enumerate(records):
        truth = _ground_truth(_get(rec, gkey), f"{where}: record {i}, field {gkey!r}")
        for response in _responses(_get(rec, rkey)):
            n += 1
            for mode in modes:
                result = compute_score("openai/gsm8k", response, truth, mode=mode, return_dict=True)
                for k in ("acc", "format", "score"):
                    totals[mode][k] += result[k]
    if n == 0:
        raise RecipeError(f"no responses under {rkey!r}", where=where)
    result = {
        "file": where,
        "response_key": rkey,
        "ground_truth_key": gkey,
        "responses": n,
        "modes": {m: {k: v / n for k, v in t.items()} for m, t in totals.items()},
    }
    if lm_eval_filters:
        result["lm_eval_exact_match"] = {f: sum(v) / len(v) for f, v in lm_eval_filters.items()}
    return result

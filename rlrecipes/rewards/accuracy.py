"""A model's greedy accuracy on a verl GSM8K parquet, scored by the reward the run trained on
(rlrecipes.rewards.gsm8k): the fast held-out check of `rlrecipes eval` and the canary's warm start."""

from __future__ import annotations

import json
import time
from pathlib import Path

from rlrecipes.errors import RecipeError
from rlrecipes.fsutil import atomic_write_text


def score_responses(responses: list[str], truths: list[str], data_sources: list[str]) -> tuple[dict, list[dict]]:
    """Accuracy of responses with the training reward, strict (`#### N`, what the reward pays) and flexible
    (last number, like lm-eval's flexible-extract); and one record per response."""
    from rlrecipes.rewards.gsm8k import compute_score

    records = []
    for index, (text, truth, source) in enumerate(zip(responses, truths, data_sources, strict=True)):
        records.append({
            "index": index, "ground_truth": str(truth),
            "strict": float(compute_score(source, text, str(truth), mode="strict")),
            "flexible": float(compute_score(source, text, str(truth), mode="flexible")),
            "response": text,
        })
    n = len(records)
    summary = {
        "n": n,
        "accuracy": sum(r["strict"] for r in records) / n if n else float("nan"),
        "flexible_accuracy": sum(r["flexible"] for r in records) / n if n else float("nan"),
    }
    return summary, records


def _load_frame(parquet: str | Path, limit: int | None):
    import pandas as pd

    parquet = Path(parquet)
    if not parquet.is_file():
        raise RecipeError("GSM8K test parquet not found", where=str(parquet),
                          hint="run `rlrecipes data gsm8k --out DATA_DIR/gsm8k` first")
    frame = pd.read_parquet(parquet)
    missing = [c for c in ("prompt", "reward_model", "data_source") if c not in frame.columns]
    if missing:
        raise RecipeError(f"not a verl GSM8K parquet: missing columns {missing}", where=str(parquet))
    return frame.head(limit) if limit is not None else frame


def greedy_accuracy(model, tokenizer, parquet: str | Path, *, limit: int | None = None, max_new_tokens: int = 512,
                    batch_size: int = 8, progress: bool = True) -> dict:
    """Greedy generations of an in-memory model on verl's GSM8K parquet (its chat prompts, left-padded
    batches), scored with the training reward; returns the summary ({"n", "accuracy", ...}) and, as
    summary["records"], one record per problem."""
    import torch

    from rlrecipes.ui import progress_bar

    frame = _load_frame(parquet, limit)
    side, tokenizer.padding_side = tokenizer.padding_side, "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    device = next(model.parameters()).device

    def render(messages) -> str:
        messages = [dict(m) for m in messages]
        if tokenizer.chat_template:
            return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return "\n".join(m["content"] for m in messages) + "\n"

    responses: list[str] = []
    try:
        with progress_bar(f"greedy eval {Path(parquet).name}", total=len(frame), enabled=progress) as advance:
            for start in range(0, len(frame), batch_size):
                chunk = frame.iloc[start:start + batch_size]
                prompts = [render(p) for p in chunk["prompt"]]
                enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False,
                                return_token_type_ids=False).to(device)
                with torch.no_grad():
                    out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                                         pad_token_id=tokenizer.pad_token_id)
                responses += tokenizer.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
                advance(len(chunk))
    finally:
        tokenizer.padding_side = side
    summary, records = score_responses(responses, [rm["ground_truth"] for rm in frame["reward_model"]],
                                       list(frame["data_source"]))
    return {**summary, "records": records}


def fast_eval(model_path: str, parquet: str | Path, *, limit: int | None = None, max_new_tokens: int = 512,
              batch_size: int = 8, device: str = "auto", dtype: str = "auto", out_file: Path | None = None) -> dict:
    """Greedy generations on verl's GSM8K parquet (its chat prompts), scored with the training reward."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _load_frame(parquet, limit)  # a missing or malformed parquet fails before the model loads
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    torch_dtype = "auto" if dtype == "auto" else getattr(torch, dtype)
    model = AutoModelForCausalLM.from_pretrained(model_path, torch_dtype=torch_dtype).to(device).eval()
    started = time.monotonic()
    summary = greedy_accuracy(model, tokenizer, parquet, limit=limit, max_new_tokens=max_new_tokens,
                              batch_size=batch_size)
    records = summary.pop("records")
    if out_file is not None:
        atomic_write_text(out_file, "".join(json.dumps(r) + "\n" for r in records))
    return {"model": str(model_path), "parquet": str(parquet), **summary,
            "seconds": round(time.monotonic() - started, 1)}


# -- CLI --------------------------------------------------------------------------------------------

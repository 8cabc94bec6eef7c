"""Canary assets: a small Qwen2 that knows the answer format but not yet the arithmetic, and its data.

A learning canary must start where reinforcement learning can move it: a random model scores 0, so its
rewards carry no signal (every GRPO advantage is 0), and a model at its ceiling has nowhere to go. So:

  1. problems: chained additions of two-digit numbers in GSM8K's shape ("What is 23 + 45 + 67?", a
     worked answer with calculator marks, "#### 135"), written by the data stage's writer with verl's
     prompt template, so the training reward (rlrecipes.rewards.gsm8k) scores them as it scores GSM8K;
  2. a tokenizer trained on the spot that splits digits one by one, as Qwen2's does;
  3. the `tiny` Qwen2 architecture (4 layers, 256 wide), warm-started by supervised fine-tuning
     (transformers' Trainer) on problems of their own seed, stopped at the first check where the
     greedy accuracy on a dev split reaches the stop point (0.15): it has learnt the format and some of
     the sums, and sampling at temperature 1 finds the right answer often enough for RL to learn from.
     The held-out problems must then score inside the start band (0.10-0.40, the canary contracts'
     "accuracy before"), else nothing is written: a start below it barely learns (seed 1 stopped at a
     dev reading of 0.121 under the old 0.10 stop point, scored 0.092 held-out, and gained 4 points in
     60 GRPO steps where seed 0, from 0.223, gained 25: docs/bench/gpu-canary.md).

    OUT/models/canary-qwen2/   the warm-started model + tokenizer, canary-manifest.json (start accuracy)
    OUT/data/canary-gsm8k/     train.parquet (RL prompts), test.parquet (held-out, >= 500 rows)

The manifest records the SFT steps, the dev-accuracy history and the held-out greedy accuracy of the
warm-started model: the "before" of the canary's contract.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from pathlib import Path

from rlrecipes.errors import RecipeError
from rlrecipes.fsutil import atomic_write_text
from rlrecipes.plan.architectures import ARCHITECTURES, ASSET_ARCHITECTURES
from rlrecipes.smoke.assets import (IM_END, _read_manifest, _replace_dir, asset_dirs, build_model,
                                    build_tokenizer, check_row_counts)

CANARY_MODEL_DIR = "canary-qwen2"
CANARY_DATA_DIR = "canary-gsm8k"
MANIFEST = "canary-manifest.json"
ARCH = ASSET_ARCHITECTURES["canary-assets"]  # what `plan` assumes before the assets exist
# Generation length of every accuracy check: the canary recipes' data.max_response_length. A worked answer
# is ~46 tokens; a shorter budget cuts the "#### N" line off and reads as a wrong answer (a 48-token check
# measured 22.5 % where 64 tokens gave 51.4 % on the same model).
MAX_NEW_TOKENS = 64
# Seeds of the three problem sets: RL prompts, held-out test, SFT (its own, so SFT never sees a test problem).
SEEDS = {"train": 1, "test": 2, "sft": 3}


def chained_additions(n: int, seed: int, terms: int = 3) -> list[dict]:
    """GSM8K-shaped rows {"question", "answer"}: the sum of `terms` two-digit numbers, worked one
    addition a line with <<a+b=c>> marks, then "#### total". Deterministic for (n, seed, terms)."""
    if terms < 2:
        raise RecipeError("a chained addition needs at least 2 terms", where="terms")
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        numbers = [rng.randint(10, 99) for _ in range(terms)]
        lines, total = [], numbers[0]
        for x in numbers[1:]:
            lines.append(f"{total} + {x} = <<{total}+{x}={total + x}>>{total + x}")
            total += x
        rows.append({"question": f"What is {' + '.join(map(str, numbers))}?",
                     "answer": "\n".join(lines) + f"\n#### {total}"})
    return rows


def sft_examples(tokenizer, rows: list[dict], template: str = "verl") -> list[dict]:
    """Chat-templated prompt (verl's GSM8K prompt, as the rollout sees it) + answer + <|im_end|>; the
    loss is on the answer only (prompt labels -100)."""
    from rlrecipes.data.gsm8k import INSTRUCTIONS

    examples = []
    for row in rows:
        messages = [{"role": "user", "content": f"{row['question']} {INSTRUCTIONS[template]}"}]
        prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        a_ids = tokenizer(row["answer"] + IM_END, add_special_tokens=False)["input_ids"]
        ids = p_ids + a_ids
        examples.append({"input_ids": ids, "attention_mask": [1] * len(ids),
                         "labels": [-100] * len(p_ids) + a_ids})
    return examples


def warm_start(model_dir: Path, dev_parquet: Path, *, sft_rows: int, band: tuple[float, float], stop_at: float,
               lr: float, batch_size: int, max_steps: int, eval_every: int, dev_rows: int, seed: int,
               log=print) -> dict:
    """Supervised fine-tuning of the model in `model_dir` (in place) with transformers' Trainer until
    the greedy accuracy on `dev_parquet` first reaches `stop_at`; returns the history. A run that never
    reaches it, or that overshoots band[1] at that check, is an error: the canary would start outside the
    range where RL can show a gain."""
    import torch
    from transformers import (AutoModelForCausalLM, AutoTokenizer, DataCollatorForSeq2Seq, Trainer,
                              TrainerCallback, TrainingArguments)

    from rlrecipes.rewards.accuracy import greedy_accuracy

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    examples = sft_examples(tokenizer, chained_additions(sft_rows, SEEDS["sft"] + seed))
    history: list[dict] = []

    class StopInBand(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step % eval_every:
                return control
            model.eval()
            summary = greedy_accuracy(model, tokenizer, dev_parquet, limit=dev_rows, max_new_tokens=MAX_NEW_TOKENS,
                                      batch_size=256, progress=False)
            model.train()
            history.append({"step": state.global_step, "dev_accuracy": summary["accuracy"]})
            log(f"sft    step {state.global_step}: dev accuracy {summary['accuracy']:.3f}")
            if summary["accuracy"] >= stop_at:
                control.should_training_stop = True
            return control

    out = model_dir.parent / f".{model_dir.name}.sft-run"
    args = TrainingArguments(
        output_dir=str(out), per_device_train_batch_size=batch_size, learning_rate=lr, max_steps=max_steps,
        lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, logging_steps=eval_every,
        save_strategy="no", report_to=[], seed=seed, use_cpu=not torch.cuda.is_available(),
        dataloader_num_workers=0, remove_unused_columns=False, disable_tqdm=True,
    )
    started = time.monotonic()
    trainer = Trainer(model=model, args=args, train_dataset=examples,
                      data_collator=DataCollatorForSeq2Seq(tokenizer, padding=True, label_pad_token_id=-100),
                      callbacks=[StopInBand()])
    trainer.train()
    shutil.rmtree(out, ignore_errors=True)
    if not history:
        raise RecipeError(f"the warm start ran {max_steps} SFT steps and no dev check (one every {eval_every})",
                          where=str(model_dir), hint="give --sft-steps at least --eval-every")
    reached = history[-1]["dev_accuracy"]
    if reached < stop_at:
        raise RecipeError(f"SFT warm start reached dev accuracy {reached:.3f} in {max_steps} steps, below the "
                          f"stop point {stop_at:.2f}", where=str(model_dir),
                          hint="raise --sft-steps or the learning rate")
    if reached > band[1]:
        raise RecipeError(f"SFT warm start jumped to dev accuracy {reached:.3f}, above the start band "
                          f"{band[0]:.2f}-{band[1]:.2f}", where=str(model_dir), hint="check more often (--eval-every)")
    model.save_pretrained(model_dir, safe_serialization=True)
    return {"steps": history[-1]["step"], "seconds": round(time.monotonic() - started, 1), "history": history,
            "lr": lr, "batch_size": batch_size}


def build_canary(out: Path | None, *, models_dir: Path | None = None, data_dir: Path | None = None, seed: int = 0,
                 train_rows: int = 4096, test_rows: int = 512, sft_rows: int = 60000,
                 band: tuple[float, float] = (0.10, 0.40), stop_at: float = 0.15, lr: float = 1e-3,
                 batch_size: int = 128,
                 max_steps: int = 2000, eval_every: int = 25, dev_rows: int = 256, force: bool = False,
                 log=print) -> dict:
    """Build (or reuse, when built before with the same settings) the canary's data and warm-started
    model under `out` (models/, data/; or models_dir, data_dir); returns the manifest (with the held-out
    start accuracy). The held-out start must lie in `band`: a model outside it is refused, nothing written."""
    if not 0 <= band[0] < band[1] <= 1:
        raise RecipeError(f"start band {band} is not 0 <= low < high <= 1", where="--band")
    if not 0 <= stop_at < band[1]:
        raise RecipeError(f"stop point {stop_at} is not 0 <= stop < the band's high {band[1]}", where="--stop-at")
    check_row_counts("--train-rows/--test-rows/--sft-rows/--dev-rows", train_rows, test_rows, sft_rows, dev_rows)
    models_dir, data_dir = asset_dirs(out, models_dir, data_dir)
    model_dir, ds_dir = models_dir / CANARY_MODEL_DIR, data_dir / CANARY_DATA_DIR
    settings = {"kind": "canary", "seed": seed, "train_rows": train_rows, "test_rows": test_rows,
                "sft_rows": sft_rows, "band": list(band), "stop_at": stop_at, "lr": lr,
                "batch_size": batch_size, "max_steps": max_steps, "eval_every": eval_every, "dev_rows": dev_rows}

    data_settings = {k: settings[k] for k in ("kind", "seed", "train_rows", "test_rows")}
    if force or _read_manifest(ds_dir, MANIFEST) != data_settings:
        from rlrecipes.data.gsm8k import write_dataset

        tmp = data_dir / f".{CANARY_DATA_DIR}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        write_dataset({"train": chained_additions(train_rows, SEEDS["train"] + seed),
                       "test": chained_additions(test_rows, SEEDS["test"] + seed),
                       # the SFT check's dev split: SFT's own seed, after the rows SFT trains on
                       "dev": chained_additions(sft_rows + dev_rows, SEEDS["sft"] + seed)[sft_rows:]},
                      tmp, template="verl", source=f"synthetic chained additions (rlrecipes.smoke.canary, seed {seed})")
        atomic_write_text(tmp / MANIFEST, json.dumps(data_settings, indent=2, sort_keys=True) + "\n")
        _replace_dir(tmp, ds_dir)
        log(f"data   {ds_dir}  ({train_rows} train / {test_rows} test rows)")
    else:
        log(f"data   {ds_dir}  (up to date)")

    manifest = _read_manifest(model_dir, MANIFEST)
    if not force and manifest is not None and manifest.get("settings") == settings:
        log(f"model  {model_dir}  (up to date: held-out start accuracy {manifest['start']['accuracy']:.3f})")
        return manifest
    from rlrecipes.rewards.accuracy import fast_eval

    corpus = [r["question"] + "\n" + r["answer"] for r in chained_additions(2000, 99)]
    corpus += ["Let's think step by step and output the final answer after \"####\".",
               "You are a helpful assistant.", "system user assistant"]
    tokenizer = build_tokenizer(corpus, 512, individual_digits=True)
    tmp = models_dir / f".{CANARY_MODEL_DIR}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    build_model(ARCHITECTURES[ARCH], tokenizer, tmp, seed)
    sft = warm_start(tmp, ds_dir / "dev.parquet", sft_rows=sft_rows, band=band, stop_at=stop_at, lr=lr,
                     batch_size=batch_size, max_steps=max_steps, eval_every=eval_every, dev_rows=dev_rows,
                     seed=seed, log=log)
    start = fast_eval(str(tmp), ds_dir / "test.parquet", max_new_tokens=MAX_NEW_TOKENS, batch_size=256)
    if not band[0] <= start["accuracy"] <= band[1]:
        shutil.rmtree(tmp, ignore_errors=True)
        dev = f", dev accuracy {sft['history'][-1]['dev_accuracy']:.3f}" if sft["history"] else ""
        raise RecipeError(f"seed {seed}'s warm-started model scores {start['accuracy']:.3f} on the {start['n']} "
                          f"held-out problems, outside the start band {band[0]:.2f}-{band[1]:.2f} (SFT stopped at "
                          f"step {sft['steps']}{dev}): a canary run from it cannot meet its contract's accuracy "
                          "before training", where=str(model_dir),
                          hint="use another --seed, or a --stop-at nearer the band's middle")
    manifest = {"settings": settings, "arch": ARCH, "sft": sft,
                "start": {k: start[k] for k in ("n", "accuracy", "flexible_accuracy")}}
    atomic_write_text(tmp / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    _replace_dir(tmp, model_dir)
    log(f"model  {model_dir}  (SFT {sft['steps']} steps in {sft['seconds']} s; held-out greedy accuracy "
        f"{start['accuracy']:.3f} on {start['n']} problems)")
    return manifest

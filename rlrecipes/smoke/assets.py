"""Offline smoke assets: a random-weight Qwen2 model, a tokenizer trained on the spot, synthetic GSM8K.

Everything is built on the CPU in seconds from a seed, with no hub access, so `make smoke` can check a
rig (GPU, driver, image, verl patches, checkpoints, resume, merge) before any real download:

    OUT/models/smoke-tiny/            config.json, model.safetensors, tokenizer files, generation_config.json
    OUT/data/smoke-gsm8k/             train.parquet, test.parquet, manifest.json (the data stage's writer)
    OUT/models/random-qwen2.5-0.5b/   with --arch qwen2.5-0.5b: the real architecture, random weights

Point a recipe at it with MODELS_DIR=OUT/models DATA_DIR=OUT/data. `--arch` models keep the real
vocabulary size (embedding and LM-head memory are part of what they measure) while the tokenizer only
uses its first few thousand ids.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

from rlrecipes.errors import RecipeError
from rlrecipes.fsutil import atomic_write_text
from rlrecipes.plan.architectures import ARCHITECTURES, Architecture

SMOKE_MODEL_DIR = "smoke-tiny"
SMOKE_DATA_DIR = "smoke-gsm8k"
MANIFEST = "smoke-manifest.json"
# Qwen2.5's special tokens, in Qwen's order; they take ids 0..2 here.
ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END)
TOKENIZER_VOCAB = 2048
# Qwen2.5-Instruct's chat template without the tool-calling branches (the smoke data has no tools).
CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if not (message['role'] == 'system' and loop.first) %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

_NAMES = ("Ava", "Ben", "Chen", "Dana", "Eli", "Fatima", "Gus", "Hana", "Ivan", "Jo", "Kemal", "Lena")
_THINGS = ("apples", "pencils", "stickers", "marbles", "books", "cookies", "stamps", "shells")


def synthetic_problems(n: int, seed: int) -> list[dict]:
    """GSM8K-shaped rows {"question", "answer"}: worked steps with <<a+b=c>> calculator marks and a
    final "#### N" line, as in the real dataset. Deterministic for (n, seed)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        name, thing = rng.choice(_NAMES), rng.choice(_THINGS)
        a, b, c = rng.randint(2, 60), rng.randint(2, 40), rng.randint(2, 9)
        kind = rng.randrange(3)
        if kind == 0:
            total = a + b
            q = f"{name} has {a} {thing} and buys {b} more. How many {thing} does {name} have now?"
            steps = f"{name} has {a} + {b} = <<{a}+{b}={total}>>{total} {thing}."
        elif kind == 1:
            a = max(a, b + 1)
            total = (a - b) * c
            q = (f"{name} had {a} {thing} and gave away {b}. Then {name} got {c} times as many as were left. "
                 f"How many {thing} does {name} have?")
            steps = (f"After giving some away {name} has {a} - {b} = <<{a}-{b}={a - b}>>{a - b} {thing}.\n"
                     f"Then {name} has {a - b} * {c} = <<{a - b}*{c}={total}>>{total} {thing}.")
        else:
            total = a * c + b
            q = (f"A box holds {c} {thing}. {name} fills {a} boxes and has {b} loose {thing}. "
                 f"How many {thing} are there in total?")
            steps = (f"The boxes hold {a} * {c} = <<{a}*{c}={a * c}>>{a * c} {thing}.\n"
                     f"With the loose ones there are {a * c} + {b} = <<{a * c}+{b}={total}>>{total} {thing}.")
        total_text = f"{total:,}" if total >= 1000 else str(total)
        rows.append({"question": q, "answer": f"{steps}\n#### {total_text}"})
    return rows


def build_tokenizer(corpus: list[str], vocab_size: int = TOKENIZER_VOCAB, chat_template: str = CHAT_TEMPLATE,
                    individual_digits: bool = False):
    """A byte-level BPE tokenizer trained on `corpus`, with Qwen's chat special tokens and a chat template
    (a transformers PreTrainedTokenizerFast; eos <|im_end|>, pad <|endoftext|>, as Qwen2.5-Instruct).
    individual_digits: every digit is a token of its own, as in Qwen2's tokenizer (a model then learns
    arithmetic digit by digit instead of memorising a token for each number)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.pre_tokenizer = (pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
                         if individual_digits else byte_level)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        additional_special_tokens=[IM_START, IM_END],
        chat_template=chat_template,
        model_max_length=32768,
        clean_up_tokenization_spaces=False,
    )


def model_dir_name(arch_name: str) -> str:
    return SMOKE_MODEL_DIR if arch_name == "tiny" else f"random-{arch_name}"


def build_model(arch: Architecture, tokenizer, out_dir: Path, seed: int, dtype: str = "float32") -> None:
    """Save a random-weight Qwen2ForCausalLM with `arch`'s exact shape into out_dir (safetensors)."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    if arch.vocab < len(tokenizer):
        raise RecipeError(f"architecture {arch.name} has vocab {arch.vocab} < tokenizer size {len(tokenizer)}",
                          where="--arch")
    eos, pad = tokenizer.convert_tokens_to_ids(IM_END), tokenizer.convert_tokens_to_ids(ENDOFTEXT)
    config = Qwen2Config(
        vocab_size=arch.vocab,
        hidden_size=arch.hidden,
        intermediate_size=arch.intermediate,
        num_hidden_layers=arch.layers,
        num_attention_heads=arch.heads,
        num_key_value_heads=arch.kv_heads,
        max_position_embeddings=arch.max_position,
        rope_theta=arch.rope_theta,
        tie_word_embeddings=arch.tie_embeddings,
        bos_token_id=pad,
        eos_token_id=eos,
        pad_token_id=pad,
        torch_dtype=dtype,
    )
    torch.manual_seed(seed)
    # Billions of parameters initialise in minutes on a CPU and in seconds on a GPU.
    from rlrecipes.plan.architectures import param_count

    device = "cuda" if param_count(arch) > 1e9 and torch.cuda.is_available() else "cpu"
    with torch.device(device):
        model = Qwen2ForCausalLM(config).to(getattr(torch, dtype))
    model = model.to("cpu")
    if device == "cuda":
        # hand the initialisation's memory back: an in-process caller (benchmarks/gpu/memory_fit.py) then launches verl
        # on the same GPU, and PyTorch's cache held 13.3 GiB of it for the whole 3B run on an H200
        torch.cuda.empty_cache()
    model.generation_config = GenerationConfig(bos_token_id=pad, eos_token_id=[eos, pad], pad_token_id=pad)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)


def _manifest(kind: str, **fields) -> dict:
    from rlrecipes import __version__

    return {"kind": kind, "rlrecipes": __version__, **fields}


def _read_manifest(directory: Path, name: str = MANIFEST) -> dict | None:
    try:
        return json.loads((directory / name).read_text())
    except (OSError, ValueError):
        return None


def _replace_dir(tmp: Path, final: Path) -> None:
    # Built beside its final place and renamed in: a failed build never leaves a half-written model.
    if final.exists():
        old = final.with_name(f".{final.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(final)


# Most rows an asset builder makes of one kind: the rows are built in memory (a count of 10^12 once took 15 GB
# before anything failed); the canary needs 60,000 SFT rows, the smoke runs a few hundred.
MAX_ROWS = 1_000_000


def check_row_counts(where: str, *counts: int) -> None:
    if not all(1 <= n <= MAX_ROWS for n in counts):
        raise RecipeError(f"row counts must be 1 .. {MAX_ROWS:,}, not {', '.join(map(str, counts))}", where=where)


def asset_dirs(out: Path | None, models_dir: Path | None, data_dir: Path | None) -> tuple[Path, Path]:
    """Where an asset builder writes: OUT/models and OUT/data, unless given apart (a recipe's MODELS_DIR and
    DATA_DIR need not be siblings); both are created."""
    if out is None and (models_dir is None or data_dir is None):
        raise RecipeError("say where to write", where="--out", hint="pass --out DIR, or both --models-dir and --data-dir")
    dirs = (Path(models_dir or Path(out) / "models").resolve(), Path(data_dir or Path(out) / "data").resolve())
    for directory in dirs:
        directory.mkdir(parents=True, exist_ok=True)
    return dirs


def build_assets(out: Path | None, arch_name: str = "tiny", seed: int = 0, train_rows: int = 256,
                 test_rows: int = 64, force: bool = False, log=print, dtype: str = "float32",
                 models_dir: Path | None = None, data_dir: Path | None = None) -> dict:
    """Build (or reuse, when built before with the same settings) the model and data under `out`
    (or models_dir, data_dir).
    Returns {"models_dir", "data_dir", "model_dir", "model", "data"} as strings."""
    if arch_name not in ARCHITECTURES:
        raise RecipeError(f"unknown architecture {arch_name!r}", where="--arch",
                          hint=f"choose from: {', '.join(sorted(ARCHITECTURES))}")
    check_row_counts("--train-rows/--test-rows", train_rows, test_rows)
    arch = ARCHITECTURES[arch_name]
    models_dir, data_dir = asset_dirs(out, models_dir, data_dir)
    model_dir, ds_dir = models_dir / model_dir_name(arch_name), data_dir / SMOKE_DATA_DIR

    rows = synthetic_problems(train_rows + test_rows, seed)
    data_manifest = _manifest("smoke-data", seed=seed, train_rows=train_rows, test_rows=test_rows)
    if force or _read_manifest(ds_dir) != data_manifest:
        from rlrecipes.data.gsm8k import write_dataset

        tmp = data_dir / f".{SMOKE_DATA_DIR}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        write_dataset({"train": rows[:train_rows], "test": rows[train_rows:]}, tmp, template="verl",
                      source=f"synthetic (rlrecipes.smoke.assets, seed {seed})")
        atomic_write_text(tmp / MANIFEST, json.dumps(data_manifest, indent=2, sort_keys=True) + "\n")
        _replace_dir(tmp, ds_dir)
        log(f"data   {ds_dir}  ({train_rows} train / {test_rows} test rows)")
    else:
        log(f"data   {ds_dir}  (up to date)")

    model_manifest = _manifest("smoke-model", arch=arch_name, seed=seed, tokenizer_vocab=TOKENIZER_VOCAB, dtype=dtype,
                               shape=[arch.layers, arch.hidden, arch.intermediate, arch.heads, arch.kv_heads, arch.vocab])
    if force or _read_manifest(model_dir) != model_manifest:
        corpus = [r["question"] for r in rows] + [r["answer"] for r in rows]
        corpus += ["Let's think step by step and output the final answer after \"####\".",
                   "You are a helpful assistant.", "system user assistant", "0123456789 #### , . $"]
        tokenizer = build_tokenizer(corpus, min(TOKENIZER_VOCAB, arch.vocab))
        tmp = models_dir / f".{model_dir.name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        build_model(arch, tokenizer, tmp, seed, dtype)
        atomic_write_text(tmp / MANIFEST, json.dumps(model_manifest, indent=2, sort_keys=True) + "\n")
        _replace_dir(tmp, model_dir)
        from rlrecipes.plan.architectures import param_count

        log(f"model  {model_dir}  ({arch_name}: {param_count(arch) / 1e6:.1f}M parameters, random, seed {seed})")
    else:
        log(f"model  {model_dir}  (up to date)")
    return {"models_dir": str(models_dir), "data_dir": str(data_dir), "model_dir": str(model_dir),
            "data": str(ds_dir), "model": model_dir.name}

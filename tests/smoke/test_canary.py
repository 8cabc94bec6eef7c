"""The learning canary's parts on the CPU: its problems, SFT examples, negative-control reward, the
warm start's stop rule, and the HF-rollout position-ids defect the canary found (verl #1637 / #2344)."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest

from rlrecipes.errors import RecipeError
from rlrecipes.rewards.gsm8k import compute_score
from rlrecipes.smoke import canary, shuffled_reward

# one xdist worker runs this module: its module fixtures are built once (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("smoke/test_canary")


def test_chained_additions_are_gsm8k_shaped_and_right():
    rows = canary.chained_additions(50, seed=7)
    assert rows == canary.chained_additions(50, seed=7)
    assert rows != canary.chained_additions(50, seed=8)
    for row in rows:
        numbers = [int(x) for x in row["question"].removeprefix("What is ").removesuffix("?").split(" + ")]
        assert len(numbers) == 3 and all(10 <= x <= 99 for x in numbers)
        total = sum(numbers)
        assert row["answer"].endswith(f"\n#### {total}")
        # the training reward pays the worked answer and nothing off by one
        assert compute_score("openai/gsm8k", row["answer"], str(total)) == 1.0
        assert compute_score("openai/gsm8k", row["answer"], str(total + 1)) == 0.0
    with pytest.raises(RecipeError, match="at least 2 terms"):
        canary.chained_additions(1, seed=0, terms=1)


def test_shuffled_reward_pays_at_its_rate_regardless_of_the_answer():
    rows = canary.chained_additions(4000, seed=3)
    right = [shuffled_reward.compute_score("openai/gsm8k", r["answer"], r["answer"].rsplit(" ", 1)[-1]) for r in rows]
    # the same texts scored against a wrong truth earn exactly the same: the answer plays no part
    wrong = [shuffled_reward.compute_score("openai/gsm8k", r["answer"], "-1") for r in rows]
    assert right == wrong
    assert abs(sum(right) / len(right) - shuffled_reward.RATE) < 0.03
    assert set(right) == {0.0, 1.0}


@pytest.fixture(scope="module")
def tokenizer():
    from rlrecipes.smoke.assets import build_tokenizer

    corpus = [r["question"] + "\n" + r["answer"] for r in canary.chained_additions(200, 99)]
    return build_tokenizer(corpus, 512, individual_digits=True)


def test_tokenizer_splits_digits_one_by_one(tokenizer):
    pieces = tokenizer.tokenize("17 + 21 = <<17+21=38>>38")
    digits = [p for p in pieces if any(c.isdigit() for c in p)]
    assert digits == list("17") + list("21") + list("1721") + list("38") + list("38")


def test_sft_examples_train_on_the_answer_only(tokenizer):
    row = canary.chained_additions(1, seed=0)[0]
    (example,) = canary.sft_examples(tokenizer, [row])
    labels, ids = example["labels"], example["input_ids"]
    n_prompt = labels.count(-100)
    assert labels[:n_prompt] == [-100] * n_prompt and -100 not in labels[n_prompt:]
    assert tokenizer.decode(ids[:n_prompt]).endswith("<|im_start|>assistant\n")
    assert tokenizer.decode(labels[n_prompt:]) == row["answer"] + "<|im_end|>"


def test_build_canary_writes_data_model_and_start_accuracy(tmp_path):
    manifest = canary.build_canary(tmp_path, train_rows=16, test_rows=8, sft_rows=64, band=(0.0, 1.0), stop_at=0.0,
                                   batch_size=8, max_steps=4, eval_every=2, dev_rows=8, log=lambda *_: None)
    model = tmp_path / "models" / canary.CANARY_MODEL_DIR
    assert json.loads((model / canary.MANIFEST).read_text()) == manifest
    assert manifest["sft"]["steps"] == 2 and manifest["start"]["n"] == 8
    assert 0.0 <= manifest["start"]["accuracy"] <= 1.0
    import pandas as pd

    data = tmp_path / "data" / canary.CANARY_DATA_DIR
    assert [len(pd.read_parquet(data / f"{s}.parquet")) for s in ("train", "test", "dev")] == [16, 8, 8]
    # unchanged settings: reused, not rebuilt
    again = canary.build_canary(tmp_path, train_rows=16, test_rows=8, sft_rows=64, band=(0.0, 1.0), stop_at=0.0,
                                batch_size=8, max_steps=4, eval_every=2, dev_rows=8, log=lambda *_: None)
    assert again == manifest


def test_warm_start_that_never_reaches_the_stop_point_is_an_error_and_leaves_no_model(tmp_path):
    with pytest.raises(RecipeError, match="below the stop point 0.99"):
        canary.build_canary(tmp_path, train_rows=8, test_rows=8, sft_rows=32, band=(0.5, 1.0), stop_at=0.99,
                            batch_size=8, max_steps=2, eval_every=2, dev_rows=8, log=lambda *_: None)
    assert not (tmp_path / "models" / canary.CANARY_MODEL_DIR).exists()


def test_a_warm_start_with_no_dev_check_is_an_error_and_leaves_no_model(tmp_path):
    with pytest.raises(RecipeError, match="ran 1 SFT steps and no dev check"):
        canary.build_canary(tmp_path, train_rows=8, test_rows=8, sft_rows=32, band=(0.0, 1.0), stop_at=0.0,
                            batch_size=8, max_steps=1, eval_every=2, dev_rows=8, log=lambda *_: None)
    assert not (tmp_path / "models" / canary.CANARY_MODEL_DIR).exists()


def test_a_held_out_start_outside_the_band_is_refused_and_leaves_no_model(tmp_path):
    """The warm start stopped (its dev check passed), but the held-out problems -- the contract's "accuracy
    before" -- score outside the start band: a canary run from that model cannot meet its contract, so none is
    written (what seed 1's assets were: dev 0.121 at the old 0.10 stop point, held-out 0.092)."""
    with pytest.raises(RecipeError, match=r"seed 3's warm-started model scores 0\.000 on the 8 held-out problems, "
                                          r"outside the start band 0\.50-1\.00 \(SFT stopped at step 2"):
        canary.build_canary(tmp_path, seed=3, train_rows=8, test_rows=8, sft_rows=32, band=(0.5, 1.0), stop_at=0.0,
                            batch_size=8, max_steps=4, eval_every=2, dev_rows=8, log=lambda *_: None)
    models = tmp_path / "models"
    assert not (models / canary.CANARY_MODEL_DIR).exists() and not list(models.glob(".*"))


@pytest.mark.parametrize("band, stop_at, where", [((0.5, 0.4), 0.1, "--band"), ((-0.1, 0.5), 0.1, "--band"),
                                                  ((0.1, 1.5), 0.1, "--band"), ((0.1, 0.4), 0.4, "--stop-at"),
                                                  ((0.1, 0.4), -0.1, "--stop-at")])
def test_bad_band_or_stop_point_is_refused_before_anything_is_written(tmp_path, band, stop_at, where):
    with pytest.raises(RecipeError) as refused:
        canary.build_canary(tmp_path / "out", band=band, stop_at=stop_at)
    assert refused.value.where == where
    assert not (tmp_path / "out").exists()


RECORDS = Path(__file__).resolve().parents[2] / "docs" / "bench" / "gpu-data"


@pytest.mark.parametrize("log, old_stop, new_stop", [
    ("recovery-faults-hopper-2/attempt-1.log", 500, 500),  # seed 0: the same model as every seed-0 record
    ("recovery-faults-hopper-4/attempt-1.log", 450, None),  # seed 1: no longer stops at its 0.121 reading
    ("recovery-faults-hopper-5/attempt-1.log", 500, 500),  # seed 0 again, with the new stop point on the GPU
    ("recovery-faults-hopper-6/attempt-1.log", 500, 500),  # and again, on another H100 host
])
def test_the_stop_point_keeps_seed_0s_assets_and_moves_seed_1s(log, old_stop, new_stop):
    """The recorded warm starts (dev accuracy every 25 SFT steps, on the GPU): the first check at or above the old
    stop point (0.10) and at or above the new default -- seed 0 stops where it did (its records stay its assets'),
    seed 1 goes on past the reading that gave it a held-out start of 0.092."""
    history = [(int(m[1]), float(m[2])) for m in re.finditer(r"sft +step (\d+): dev accuracy ([0-9.]+)",
                                                                 (RECORDS / log).read_text())]
    first = lambda at: next((step for step, acc in history if acc >= at), None)  # noqa: E731
    stop_at = inspect.signature(canary.build_canary).parameters["stop_at"].default
    assert (first(0.10), first(stop_at)) == (old_stop, new_stop) and history[-1][0] == old_stop


def test_generate_with_given_position_ids_pins_new_tokens_to_the_last_prompt_position():
    """The call verl 0.5.0's HF rollout makes (left-padded prompts, position_ids from the mask, cache on,
    generate() of the transformers its image pins): every generated token is fed to the model at the last
    prompt position; without position_ids generate() derives them from the mask and they advance. This is
    what the rollout-position-ids edit of scripts/patch_verl.py --image p40 removes; on a GPU the pinned
    rollout wrote "1777777..." and scored 0 (docs/bench/gpu-canary.md)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                         pad_token_id=0, eos_token_id=63)).eval()
    seen: list[list[list[int]]] = []
    inner = model.model.forward

    def recording(*args, **kwargs):
        seen.append(kwargs["position_ids"].tolist())
        return inner(*args, **kwargs)

    model.model.forward = recording
    ids = torch.tensor([[0, 0, 0, 11, 12, 13], [5, 6, 7, 8, 9, 10]])  # left-padded, as verl's batches
    mask = (ids != 0).long()
    positions = torch.clamp(mask.cumsum(-1) - 1, min=0)  # verl's compute_position_id_with_mask
    kwargs = dict(attention_mask=mask, max_new_tokens=4, do_sample=False, pad_token_id=0, eos_token_id=None,
                  use_cache=True)
    with torch.no_grad():
        model.generate(ids, position_ids=positions, **kwargs)
        pinned, seen[:] = list(seen), []
        model.generate(ids, **kwargs)
    assert pinned[0] == positions.tolist()
    assert pinned[1:] == [[[2], [5]]] * 3  # every new token at the last prompt position
    assert seen[0][0][3:] == [0, 1, 2] and seen[0][1] == [0, 1, 2, 3, 4, 5]
    assert seen[1:] == [[[3], [6]], [[4], [7]], [[5], [8]]]  # derived from the mask: they advance


@pytest.mark.parametrize("command, flag", [("canary-assets", "--sft-rows"), ("canary-assets", "--dev-rows"),
                                           ("smoke-assets", "--train-rows")])
@pytest.mark.parametrize("count", ["0", str(10**12)])
def test_row_counts_outside_what_fits_in_memory_are_refused_before_anything_is_written(tmp_path, capsys, command,
                                                                                        flag, count):
    """`canary-assets --sft-rows 1000000000000` built rows in memory until it held 15 GB."""
    from rlrecipes.cli import main

    assert main([command, "--out", str(tmp_path / "out"), flag, count]) == 2
    err = capsys.readouterr().err
    assert "row counts must be 1 .. 1,000,000" in err and flag in err
    assert not (tmp_path / "out").exists()

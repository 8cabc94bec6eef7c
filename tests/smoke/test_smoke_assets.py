"""`rlrecipes smoke-assets`: a random Qwen2 with the table's architecture, a Qwen-style tokenizer trained
on the spot, and synthetic GSM8K written by the data stage's writer -- built for real, on the CPU."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rlrecipes.errors import RecipeError
from rlrecipes.fsutil import sha256_file
from rlrecipes.plan.architectures import ARCHITECTURES, param_count
from rlrecipes.smoke import assets as sa

# one xdist worker runs this module: its module fixtures are built once (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("smoke/test_smoke_assets")

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("smoke")
    return sa.build_assets(out, "tiny", seed=0, train_rows=40, test_rows=8, log=lambda *_: None)


def test_model_has_the_tiny_architecture_and_loads(built):
    import torch
    from transformers import AutoModelForCausalLM

    model_dir = Path(built["model_dir"])
    assert model_dir.name == "smoke-tiny" and (model_dir / "model.safetensors").is_file()
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    arch, cfg = ARCHITECTURES["tiny"], model.config
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.intermediate_size, cfg.num_attention_heads,
            cfg.num_key_value_heads, cfg.vocab_size, cfg.tie_word_embeddings) == (
        arch.layers, arch.hidden, arch.intermediate, arch.heads, arch.kv_heads, arch.vocab, arch.tie_embeddings)
    assert sum(p.numel() for p in model.parameters()) == param_count(arch)
    assert model.dtype == torch.float32
    with torch.no_grad():
        logits = model(torch.tensor([[1, 5, 9]])).logits
    assert logits.shape == (1, 3, arch.vocab) and torch.isfinite(logits).all()


def test_tokenizer_has_qwen_chat_tokens_and_template(built):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(built["model_dir"])
    assert [tok.convert_tokens_to_ids(t) for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>")] == [0, 1, 2]
    assert (tok.eos_token, tok.pad_token) == ("<|im_end|>", "<|endoftext|>")
    text = tok.apply_chat_template([{"role": "user", "content": "What is 2 + 3?"}], tokenize=False,
                                   add_generation_prompt=True)
    assert text == ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                    "<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n")
    ids = tok(text)["input_ids"]
    assert ids.count(1) == 3 and ids.count(2) == 2  # special tokens are single ids, not split
    sample = "Ava has 17 + 25 = <<17+25=42>>42 pencils.\n#### 1,042 ÷ é"
    assert tok.decode(tok(sample)["input_ids"]) == sample  # byte-level: lossless on any text
    generation = json.loads((Path(built["model_dir"]) / "generation_config.json").read_text())
    assert generation["eos_token_id"] == [2, 0]


def test_data_is_verl_gsm8k_layout_with_correct_ground_truth(built):
    import pyarrow.parquet as pq

    data = Path(built["data"])
    manifest = json.loads((data / "manifest.json").read_text())
    assert manifest["splits"]["train"]["rows"] == 40 and manifest["splits"]["test"]["rows"] == 8
    rows = pq.read_table(data / "train.parquet").to_pylist()
    assert len(rows) == 40
    for row in rows:
        assert row["data_source"] == "openai/gsm8k" and row["ability"] == "math"
        assert row["prompt"][0]["role"] == "user"
        assert row["prompt"][0]["content"].endswith('output the final answer after "####".')
        answer = row["extra_info"]["answer"]
        final = answer.rsplit("#### ", 1)[1]
        assert row["reward_model"] == {"ground_truth": final.replace(",", ""), "style": "rule"}


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_synthetic_problems_do_their_arithmetic_right(seed):
    rows = sa.synthetic_problems(60, seed)
    assert len({r["question"] for r in rows}) > 50
    for row in rows:
        marks = re.findall(r"<<([0-9+\-*]+)=(-?\d+)>>", row["answer"])
        assert marks, row["answer"]
        for expr, result in marks:
            assert eval(expr) == int(result), (expr, result)  # noqa: S307 -- digits and + - * only
        final = int(row["answer"].rsplit("#### ", 1)[1].replace(",", ""))
        assert final == int(marks[-1][1]) and final > 0


def test_synthetic_problems_are_deterministic_per_seed():
    assert sa.synthetic_problems(20, 3) == sa.synthetic_problems(20, 3)
    assert sa.synthetic_problems(20, 3) != sa.synthetic_problems(20, 4)


def test_rebuild_is_skipped_when_up_to_date_and_forced_when_asked(built):
    model_file = Path(built["model_dir"]) / "model.safetensors"
    before = model_file.stat().st_mtime_ns
    messages = []
    sa.build_assets(Path(built["models_dir"]).parent, "tiny", seed=0, train_rows=40, test_rows=8, log=messages.append)
    assert all("up to date" in m for m in messages) and len(messages) == 2
    assert model_file.stat().st_mtime_ns == before


def test_same_seed_same_bytes_other_seed_other_weights(tmp_path, built):
    again = sa.build_assets(tmp_path / "a", "tiny", seed=0, train_rows=40, test_rows=8, log=lambda *_: None)
    other = sa.build_assets(tmp_path / "b", "tiny", seed=1, train_rows=40, test_rows=8, log=lambda *_: None)
    weights = lambda r: sha256_file(Path(r["model_dir"]) / "model.safetensors")  # noqa: E731
    train = lambda r: sha256_file(Path(r["data"]) / "train.parquet")  # noqa: E731
    assert weights(again) == weights(built) and train(again) == train(built)
    assert weights(other) != weights(built) and train(other) != train(built)
    assert not list(Path(again["models_dir"]).glob(".*")), "no temporary directories left behind"


def test_unknown_architecture_is_a_clear_error(tmp_path):
    with pytest.raises(RecipeError) as exc:
        sa.build_assets(tmp_path, "qwen9-1t")
    assert exc.value.where == "--arch" and "qwen2.5-0.5b" in exc.value.hint
    assert not (tmp_path / "models").exists()


def test_cli_builds_and_prints_the_directories(tmp_path):
    result = subprocess.run([sys.executable, "-m", "rlrecipes", "smoke-assets", "--out", str(tmp_path),
                             "--train-rows", "16", "--test-rows", "4"],
                            capture_output=True, text=True, timeout=300, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert f"export MODELS_DIR={tmp_path / 'models'} DATA_DIR={tmp_path / 'data'}" in result.stdout
    assert (tmp_path / "models" / "smoke-tiny" / "tokenizer.json").is_file()
    bad = subprocess.run([sys.executable, "-m", "rlrecipes", "smoke-assets", "--out", str(tmp_path), "--arch", "x"],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    assert bad.returncode == 2 and "invalid choice: 'x'" in bad.stderr

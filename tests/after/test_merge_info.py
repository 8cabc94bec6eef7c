"""merge-info.json: one declared record (MergeInfo) that the merge writes and eval reads back."""

from __future__ import annotations

import json

import pytest

from rlrecipes.after.merge_info import FILE, LoraInfo, MergeInfo


def _lora_info() -> MergeInfo:
    return MergeInfo(checkpoint="/ckpt/global_step_4/actor", step=4, recipe="smoke-grpo-lora", dtype="bfloat16",
                     base_hub_id="Qwen/Qwen2.5-0.5B-Instruct",
                     lora=LoraInfo(r=8, alpha=16.0, alpha_source="recipe", targets=["q_proj", "v_proj"], modules=4,
                                   scaling=2.0),
                     base_model="/models/base", base_note="the recipe's base model",
                     logits={"max_abs_diff": 0.01}, metrics={"val-core/acc": 0.5},
                     verification={"loads": True, "changed_targeted": 4, "changed_other": 0}, seconds=12.5)


def test_a_lora_record_round_trips_through_its_file(tmp_path):
    info = _lora_info()
    path = info.write(tmp_path)
    assert path == tmp_path / FILE
    data = json.loads(path.read_text())
    assert list(data) == ["checkpoint", "step", "recipe", "dtype", "base_hub_id", "lora", "base_model", "base_note",
                          "logits", "metrics", "verification", "seconds"]
    assert data["lora"] == {"r": 8, "alpha": 16.0, "alpha_source": "recipe", "targets": ["q_proj", "v_proj"],
                            "modules": 4, "scaling": 2.0}
    assert MergeInfo.read(tmp_path) == info


def test_a_full_weights_record_has_no_lora_only_keys(tmp_path):
    info = MergeInfo(checkpoint="/c", step=2, recipe=None, dtype="float32", base_hub_id=None, base_model="/b")
    info.write(tmp_path)
    data = json.loads((tmp_path / FILE).read_text())
    assert "base_note" not in data and "logits" not in data and data["lora"] is None
    assert MergeInfo.read(tmp_path) == info


@pytest.mark.parametrize("content", [None, "{broken", "[1]", '{"lora": {"r": 8}}', '{"step": 1, "colour": "red"}'])
def test_reading_what_is_not_a_record_gives_none_or_what_it_has(tmp_path, content):
    if content is not None:
        (tmp_path / FILE).write_text(content)
    got = MergeInfo.read(tmp_path)
    if content == '{"step": 1, "colour": "red"}':  # unknown keys of a newer writer are ignored, the rest read
        assert got is not None and got.step == 1 and got.dtype == "" and got.lora is None
    else:
        assert got is None

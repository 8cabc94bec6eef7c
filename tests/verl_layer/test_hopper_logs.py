"""The log readers on real verl 0.9.1 output: the consoles and file-logger metrics of the H200 smoke runs
(docs/bench/gpu-data/hopper/, V1 trainer, vLLM 0.24.0 rollout). Steps, the V1 resume message and the
rollout-sync verdict come out of them as `rlrecipes smoke` read them live; the unpatched PPO console
shows the critic's flash-attn failure and no step."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from rlrecipes.verl.rollout_sync import check_rollout_sync
from rlrecipes.smoke.run import check_rollout_in_sync
from rlrecipes.verl.logs import parse_jsonl_record, parse_steps, resumed_from

DATA = Path(__file__).resolve().parents[2] / "docs" / "bench" / "gpu-data" / "hopper"


def console(name: str) -> str:
    return gzip.decompress((DATA / name).read_bytes()).decode("utf-8", "replace")


@pytest.mark.parametrize("recipe, stamp", [("smoke-grpo-lora", "20261201T020707Z"), ("smoke-ppo", "20261201T022306Z")])
def test_real_091_consoles_kill_resume_and_sync(recipe, stamp):
    first = console(f"{recipe}-console-{stamp}-1.log.gz")
    second = console(f"{recipe}-console-{stamp}-2.log.gz")
    assert resumed_from(first) is None
    assert resumed_from(second) == 2  # V1: "Resuming from .../global_step_2, setting global step to 2"
    steps_1, steps_2 = parse_steps(first), parse_steps(second)
    assert max(steps_1) == 2 and sorted(steps_2) == [3, 4]
    steps = {**steps_1, **steps_2}
    assert check_rollout_in_sync(recipe, steps).ok
    assert all(steps[s]["training/rollout_probs_diff_valid"] == 1.0 for s in steps)


@pytest.mark.parametrize("recipe", ["smoke-grpo-lora", "smoke-ppo"])
def test_real_091_file_logger_agrees_with_the_console(recipe):
    records = {}
    for path in sorted(DATA.glob(f"{recipe}-metrics-*.jsonl")):
        for line in path.read_text().splitlines():
            step, data = parse_jsonl_record(line)
            records[step] = data
    assert sorted(records) == [1, 2, 3, 4]
    verdict = check_rollout_sync(records)
    assert verdict.status == "in sync", verdict.detail
    assert max(r["training/rollout_probs_diff_mean"] for r in records.values()) < 0.001
    assert min(r["training/rollout_actor_probs_pearson_corr"] for r in records.values()) > 0.9999


def test_unpatched_ppo_console_fails_on_the_critic_attention():
    text = console("smoke-ppo-unpatched-console-20261201T021624Z-1.log.gz")
    assert parse_steps(text) == {}
    assert "FlashAttention2 has been toggled on" in text and "load_valuehead_model" in text

"""`rlrecipes plan` estimates time only from a throughput measured on the profile's own hardware and says what
it was measured on; the figures live in rlrecipes/reference.py alone."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from rlrecipes.cli import main
from rlrecipes.plan import build_plan
from rlrecipes.recipe import resolve
from rlrecipes.reference import THROUGHPUTS, throughput_for

GRPO = "qwen2.5-3b-gsm8k-grpo-lora"


def plan_time(profile: str, *overrides: str, recipe: str = GRPO):
    time = build_plan(resolve(recipe, profile=profile, overrides=list(overrides))).time
    return asdict(time) if time else None


def test_h200_rollout_estimate_from_verls_rollout_on_an_h200():
    time = plan_time("h200-141gb")
    # 1024 prompts x 5 responses x 1024 tokens at verl's measured 11,617 tokens/s on one engine; 7 steps x 5 epochs
    assert time["seconds_per_step"] == pytest.approx(1024 * 5 * 1024 / 11617)
    assert time["total_seconds"] == pytest.approx(35 * 1024 * 5 * 1024 / 11617)
    assert time["kind"] == "rollout_tokens_per_s" and "rollout only" in time["covers"]
    assert "verl 0.9.1's rollout phase" in time["measured_on"] and "H200" in time["measured_on"]
    # two GPUs = two TP-1 engines; longer responses cost proportionally more
    assert plan_time("h200-141gb-2gpu")["seconds_per_step"] == pytest.approx(time["seconds_per_step"] / 2)
    assert plan_time("h200-141gb", "data.max_response_length=2048")["seconds_per_step"] == pytest.approx(
        2 * time["seconds_per_step"])


def test_a100_step_time_scales_with_generated_tokens():
    time = plan_time("a100-80gb")
    assert time["kind"] == "step_seconds" and time["seconds_per_step"] == pytest.approx(206.0)
    assert time["total_seconds"] == pytest.approx(206.0 * 35)
    assert "4x A100 80GB" in time["measured_on"]
    assert plan_time("a100-80gb", "data.train_batch_size=512")["seconds_per_step"] == pytest.approx(103.0)


@pytest.mark.parametrize(("recipe", "profile"), [
    (GRPO, "h100-80gb"),                   # nothing measured on H100s: no borrowed A100 figure
    ("qwen2.5-0.5b-gsm8k-ppo", "p40-24gb"),  # the P40 fit runs were an H200 under a memory cap, not a P40
    ("smoke-grpo-lora", "any-1gpu-hopper"),  # a tiny model: the 3B rollout rate does not apply
])
def test_no_estimate_without_a_measurement_on_that_hardware(recipe, profile):
    assert plan_time(profile, recipe=recipe) is None


def test_every_throughput_names_existing_profiles_and_its_record():
    from rlrecipes.recipe import list_profiles

    for t in THROUGHPUTS:
        assert set(t.profiles) <= set(list_profiles()), t.profiles
        assert t.measured_on and "docs/" in t.source and t.value > 0
    assert throughput_for(GRPO, "h200-141gb", "Qwen/Qwen2.5-3B-Instruct").value == 11617.0


def test_plan_cli_prints_the_estimate_and_its_origin(capsys):
    assert main(["plan", GRPO, "--profile", "h200-141gb"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "time (estimate)" in out and "~451 s/step, 4.4 h for 35 steps" in out
    assert "(record: docs/bench/gpu-hopper-3b.md)" in out.replace("│ ", "")
    assert main(["plan", GRPO, "--profile", "h200-141gb", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["time"]["seconds_per_step"] == pytest.approx(5120 * 1024 / 11617)
    assert main(["plan", "qwen2.5-0.5b-gsm8k-ppo"]) == 0
    assert "none: no throughput measured" in capsys.readouterr().out

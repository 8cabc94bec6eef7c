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


def test_h200_step_time_from_a_finished_verl_step_on_an_h200():
    time = plan_time("h200-141gb")
    # step 2 of the 3B run took 359.2 s for 128 prompts x 5 x 1024 tokens; the shipped 1024 x 5 is 8x the tokens
    assert time["kind"] == "step_seconds" and "whole step" in time["covers"]
    assert time["seconds_per_step"] == pytest.approx(359.2 * 8)
    assert time["total_seconds"] == pytest.approx(35 * 359.2 * 8)
    assert "verl 0.9.1" in time["measured_on"] and "H200" in time["measured_on"]
    assert plan_time("h200-141gb", "data.train_batch_size=128")["seconds_per_step"] == pytest.approx(359.2)
    assert plan_time("h200-141gb", "data.max_response_length=2048")["seconds_per_step"] == pytest.approx(
        2 * time["seconds_per_step"])


def test_two_h200s_get_the_rollout_rate_of_one_engine_per_gpu_not_the_one_gpu_step_time():
    time = plan_time("h200-141gb-2gpu")
    assert time["kind"] == "rollout_tokens_per_s" and "rollout only" in time["covers"]
    # 1024 prompts x 5 x 1024 tokens over two TP-1 engines at verl's measured 12,495 tokens/s each
    assert time["seconds_per_step"] == pytest.approx(1024 * 5 * 1024 / 12495 / 2)
    assert "nothing has run on two GPUs" in time["measured_on"]


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
    assert throughput_for(GRPO, "h200-141gb", "Qwen/Qwen2.5-3B-Instruct").value == 359.2
    # a step time belongs to its recipe: another recipe with the same model gets no borrowed figure
    assert throughput_for("some-other-3b-recipe", "h200-141gb", "Qwen/Qwen2.5-3B-Instruct") is None


def test_plan_cli_prints_the_estimate_and_its_origin(capsys):
    assert main(["plan", GRPO, "--profile", "h200-141gb"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "time (estimate)" in out and "~2874 s/step, 27.9 h for 35 steps" in out
    assert "(record: docs/bench/gpu-hopper-3b.md)" in out.replace("│ ", "")
    assert main(["plan", GRPO, "--profile", "h200-141gb", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["time"]["seconds_per_step"] == pytest.approx(359.2 * 8)
    assert main(["plan", "qwen2.5-0.5b-gsm8k-ppo"]) == 0
    assert "none: no throughput measured" in capsys.readouterr().out


def test_measured_memory_sits_beside_the_estimate_and_its_estimates_are_the_planners():
    from rlrecipes.memory import estimate_memory
    from rlrecipes.reference import MEASURED_MEMORY, measured_memory

    m = measured_memory(GRPO, "h200-141gb")
    assert m is not None and measured_memory(GRPO, "h200-141gb-2gpu") is None  # one GPU's figures only
    assert measured_memory("qwen2.5-0.5b-gsm8k-ppo", "h200-141gb") is None
    # the "estimate" beside each measured figure is what the planner says today for the measured settings:
    # a planner change that moves it makes this fail until the record and the figure are looked at again
    est = estimate_memory(resolve(GRPO, profile="h200-141gb", overrides=[
        "data.train_batch_size=128", "actor_rollout_ref.actor.ppo_mini_batch_size=64"]))
    training = max(est.phase_gib("log_prob"), est.phase_gib("update_actor"))
    (_, _, rollout_est), *training_rows = m.phases
    assert rollout_est == pytest.approx(est.phase_gib("rollout"), abs=0.05)
    assert all(e == pytest.approx(training, abs=0.05) for _, _, e in training_rows)
    for mm in MEASURED_MEMORY:
        assert "docs/" in mm.source and all(got > 0 for _, got, _ in mm.phases)


def test_plan_shows_the_measured_memory(capsys):
    assert main(["plan", GRPO, "--profile", "h200-141gb"]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "GPU memory, measured" in out and "82.2 GiB (estimate 110.7)" in out
    assert main(["plan", GRPO, "--profile", "h200-141gb", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["memory_measured"]["phases"][1][1] == 82.2
    assert main(["plan", GRPO, "--profile", "a100-80gb", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["memory_measured"] is None

"""`rlrecipes plan` estimates time only from a throughput measured on the profile's own hardware and says what
it was measured on; the figures live in rlrecipes/reference.py alone."""

from __future__ import annotations

import dataclasses
import json
import statistics
from dataclasses import asdict
from pathlib import Path

import pytest

from rlrecipes.cli import main
from rlrecipes.plan.plan import build_plan
from rlrecipes.recipe.load import resolve
from rlrecipes import reference
from rlrecipes.plan import timing
from rlrecipes.verl.startup import read_startup
from rlrecipes.reference import THROUGHPUTS, throughput_for

GRPO = "qwen2.5-3b-gsm8k-grpo-lora"


def plan_time(profile: str, *overrides: str, recipe: str = GRPO):
    time = build_plan(resolve(recipe, profile=profile, overrides=list(overrides))).time
    return asdict(time) if time else None


def test_h200_step_time_from_a_finished_verl_step_on_an_h200():
    time = plan_time("h200-141gb")
    # the profile ships fused kernels: step 2 of that run took 63.96 s for 64 prompts x 5 x 1024 tokens; the
    # shipped 1024 x 5 is 16x the tokens
    assert time["kind"] == "step_seconds" and "whole step" in time["covers"]
    assert time["seconds_per_step"] == pytest.approx(63.96 * 16)
    assert time["total_seconds"] == pytest.approx(35 * 63.96 * 16)
    assert "verl 0.9.1" in time["measured_on"] and "H200" in time["measured_on"]
    assert "fused kernels" in time["measured_on"]
    assert plan_time("h200-141gb", "data.train_batch_size=64")["seconds_per_step"] == pytest.approx(63.96)
    assert plan_time("h200-141gb", "data.max_response_length=2048")["seconds_per_step"] == pytest.approx(
        2 * time["seconds_per_step"])


def test_the_step_time_follows_the_fused_kernel_setting_it_was_measured_with():
    # switched off, the run gets the figure measured without them (step 2 at 128 x 5: 359.2 s), not the fast one
    off = plan_time("h200-141gb", "actor_rollout_ref.model.use_fused_kernels=false")
    assert off["seconds_per_step"] == pytest.approx(359.2 * 8) and "without fused kernels" in off["measured_on"]
    assert plan_time("h200-141gb", "actor_rollout_ref.model.use_fused_kernels=false",
                     "data.train_batch_size=128")["seconds_per_step"] == pytest.approx(359.2)


def test_two_h200s_get_the_rollout_rate_of_one_engine_per_gpu_not_the_one_gpu_step_time():
    time = plan_time("h200-141gb-2gpu")
    assert time["kind"] == "rollout_tokens_per_s" and "rollout only" in time["covers"]
    # 1024 prompts x 5 x 1024 tokens over two TP-1 engines at verl's measured 17,980 tokens/s each
    assert time["seconds_per_step"] == pytest.approx(1024 * 5 * 1024 / 17980 / 2)
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
    from rlrecipes.recipe.load import list_profiles

    fused = {"actor_rollout_ref.model.use_fused_kernels": True}.get
    for t in THROUGHPUTS:
        assert set(t.profiles) <= set(list_profiles()), t.profiles
        assert t.measured_on and "docs/" in t.source and t.value > 0
    assert throughput_for(GRPO, "h200-141gb", "Qwen/Qwen2.5-3B-Instruct", fused).value == 63.96
    # a figure measured with a setting does not apply to a config that lacks it
    assert throughput_for(GRPO, "h200-141gb", "Qwen/Qwen2.5-3B-Instruct", {}.get) is None
    # a step time belongs to its recipe: another recipe with the same model gets no borrowed figure
    assert throughput_for("some-other-3b-recipe", "h200-141gb", "Qwen/Qwen2.5-3B-Instruct", fused) is None


# what a sibling may set otherwise than the figure's recipe (Throughput.siblings): the algorithm's advantage and loss
# normalisation, work of milliseconds a step, and its own names
SIBLING_MAY_DIFFER = {"algorithm.adv_estimator", "algorithm.norm_adv_by_std_in_grpo",
                      "actor_rollout_ref.actor.loss_agg_mode", "trainer.default_local_dir", "trainer.experiment_name"}


@pytest.mark.parametrize("t", [t for t in THROUGHPUTS if t.siblings], ids=lambda t: t.key)
def test_a_siblings_step_is_its_recipes_and_the_plan_says_whose(t):
    """A figure applies to a recipe it was not timed on only where that recipe launches the figure's recipe as it
    is but for the algorithm's advantage and loss keys; the plan then gives the same step, names whose it is, and
    keeps the figure's own validation, start-up and other hosts out."""
    for profile in t.profiles:
        own = resolve(t.recipe, profile=profile)
        shipped = plan_time(profile, recipe=t.recipe)
        for sibling in t.siblings:
            run = resolve(sibling, profile=profile)
            differ = {k for k in own.overrides.keys() | run.overrides.keys()
                      if own.overrides.get(k) != run.overrides.get(k)}
            assert differ and differ <= SIBLING_MAY_DIFFER, (sibling, differ - SIBLING_MAY_DIFFER)
            time = plan_time(profile, recipe=sibling)
            assert time["seconds_per_step"] == shipped["seconds_per_step"]
            assert time["scaled"].startswith(f"{t.recipe}'s step, not this recipe's")
            assert time["startup_seconds"] is None and time["validation_seconds"] is None and time["hosts"] == ()
    # the matrix recipes that update four times a step, or generate longer, are no siblings: no time
    assert plan_time("any-1gpu-hopper", recipe="canary-gspo") is None
    assert plan_time("any-1gpu-hopper", recipe="canary-dapo") is None


def test_plan_cli_prints_the_estimate_and_its_origin(capsys):
    assert main(["plan", GRPO, "--profile", "h200-141gb"]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "time (estimate)" in out and "~10.0 h for 35 steps: ~1023.4 s/step at the maximum length" in out
    assert "(record: docs/bench/gpu-hopper-3b.md)" in out
    # the record's responses all ran to 1024 tokens (ignore_eos): no lower figure, and it says so
    assert "the recorded run's mean, 1024, is not shorter: no lower figure" in out
    # the README quotes what plan prints, for the fused figure and the unfused one
    readme = " ".join((REPO / "README.md").read_text().split())
    assert "10.0 h for the shipped 1024 x 5 on one H200, the recorded start-up included" in readme
    assert main(["plan", GRPO, "--profile", "h200-141gb", "actor_rollout_ref.model.use_fused_kernels=false"]) == 0
    unfused = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "~28.0 h for 35 steps" in unfused and "unfused measurement: 28.0 h)" in readme
    # and docs/hardware.md, with the start-up each record's console log times from Ray
    hardware = (REPO / "docs" / "hardware.md").read_text()
    for record, hours in (("hopper-3b-64/variant", "10.0"), ("hopper-3b-steps", "28.0")):
        ray_to_ready = read_startup(REPO / "docs/bench/gpu-data" / record / "verl-console.log.gz").ray_to_ready_s
        assert f"start-up from Ray ({ray_to_ready:.0f} s)" in hardware and f"~{hours} h |" in hardware
    assert main(["plan", GRPO, "--profile", "h200-141gb", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["time"]["seconds_per_step"] == pytest.approx(63.96 * 16)
    assert data["time"]["startup_from"] == "ray" and 200 < data["time"]["startup_seconds"] < 300
    assert main(["plan", "qwen2.5-0.5b-gsm8k-ppo"]) == 0
    assert "none: no throughput measured" in capsys.readouterr().out


@pytest.mark.parametrize(("fused", "batch"), [("true", 64), ("false", 128)])
def test_measured_memory_sits_beside_the_estimate_and_its_estimates_are_the_planners(fused, batch):
    from rlrecipes.plan.memory import estimate_memory
    from rlrecipes.reference import MEASURED_MEMORY, measured_memory

    setting = f"actor_rollout_ref.model.use_fused_kernels={fused}"
    run = resolve(GRPO, profile="h200-141gb", overrides=[
        setting, f"data.train_batch_size={batch}", f"actor_rollout_ref.actor.ppo_mini_batch_size={batch // 2}"])
    m = measured_memory(GRPO, "h200-141gb", run.get)
    assert m is not None and m.settings.startswith(f"{batch} prompts x 5")
    two = resolve(GRPO, profile="h200-141gb-2gpu", overrides=[setting])
    assert measured_memory(GRPO, "h200-141gb-2gpu", two.get) is None  # one GPU's figures only
    assert measured_memory("qwen2.5-0.5b-gsm8k-ppo", "h200-141gb", run.get) is None
    # the "estimate" beside each measured figure is what the planner says today for the measured settings:
    # a planner change that moves it makes this fail until the record and the figure are looked at again
    est = estimate_memory(run)
    for what, _, estimate, phase in m.phases:
        want = (max(est.phase_gib("log_prob"), est.phase_gib("update_actor")) if phase == "training"
                else est.phase_gib(phase))
        assert estimate == pytest.approx(want, abs=0.05), what
    for mm in MEASURED_MEMORY:
        assert "docs/" in mm.source and all(got > 0 for _, got, _, _ in mm.phases)


def test_plan_shows_the_measured_memory(capsys):
    assert main(["plan", GRPO, "--profile", "h200-141gb"]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "GPU memory, measured" in out and "17.1 GiB (estimate 17.1)" in out
    assert main(["plan", GRPO, "--profile", "h200-141gb", "--json", "actor_rollout_ref.model.use_fused_kernels=false"]) == 0
    assert json.loads(capsys.readouterr().out)["memory_measured"]["phases"][1][1] == 82.2
    assert main(["plan", GRPO, "--profile", "a100-80gb", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["memory_measured"] is None


# -- the range: responses at the recorded run's mean length .. at the maximum; validation; what is not recorded --

def recorded(path: str) -> dict:
    """Straight from verl's metrics JSONL: {step: metrics}."""
    steps: dict[int, dict] = {}
    for line in (REPO / path).read_text().splitlines():
        record = json.loads(line)
        steps.setdefault(record["step"], {}).update(record["data"])
    return steps


REPO = Path(__file__).resolve().parents[2]
CANARY = "canary-grpo-lora"


def test_each_measured_step_time_is_its_recorded_runs_steady_steps():
    # the figure typed in reference.py is the recorded run's timing_s/step: the steps with no validation,
    # each launch's first left out (steady_step_times, which expect judges a run by)
    for t in THROUGHPUTS:
        if t.metrics and t.kind == "step_seconds":
            steps = recorded(t.metrics)
            steady = [m["timing_s/step"] for s, m in steps.items() if "timing_s/step" in m and s != min(
                s for s, m in steps.items() if "timing_s/step" in m) and "timing_s/testing" not in m]
            assert t.value == pytest.approx(sum(steady) / len(steady), rel=1e-3), t.key


def test_canary_range_runs_from_the_recorded_mean_length_to_the_maximum():
    time = plan_time("any-1gpu-hopper", recipe=CANARY)
    steps = recorded(reference.CANARY_HOPPER_METRICS)
    first = min(s for s, m in steps.items() if "timing_s/step" in m)
    steady = [s for s, m in steps.items() if "timing_s/step" in m and s != first and "timing_s/testing" not in m]
    mean = sum(steps[s]["response_length/mean"] for s in steady) / len(steady)
    assert 40 < mean < 64 == time["max_response_length"]
    assert time["recorded_mean_length"] == pytest.approx(mean)
    # at the recorded mean the step is the measured one; at the maximum, scaled up by generated tokens
    assert time["low_seconds_per_step"] == pytest.approx(5.13)
    assert time["seconds_per_step"] == pytest.approx(5.13 * 64 / mean)
    assert time["low_seconds_per_step"] < time["seconds_per_step"]
    assert time["low_total_seconds"] < time["high_total_seconds"]
    # validation and saves as recorded: the median of timing_s/testing and timing_s/save_checkpoint
    val = statistics.median(m["timing_s/testing"] for m in steps.values() if "timing_s/testing" in m)
    save = statistics.median(m["timing_s/save_checkpoint"] for m in steps.values() if "timing_s/save_checkpoint" in m)
    assert time["validation_seconds"] == pytest.approx(val) and time["save_seconds"] == pytest.approx(save)
    assert time["validations"] == 7 and time["saves"] == 2  # 60 steps: before training + every 10th; 30 and 60
    # and its start-up, once: the recorded launch's console log, launch to verl's "ready to fit"
    console = REPO / reference.CANARY_HOPPER_METRICS.replace("metrics-", "console-").replace(".jsonl", ".log")
    startup = read_startup(console).total_s
    assert time["startup_seconds"] == pytest.approx(startup) and 200 < startup < 300
    assert time["startup"].startswith(f"{startup:.0f} s as recorded (launch to verl's 'ready to fit'")
    assert time["startup_from"] == "launch"
    assert time["high_total_seconds"] == pytest.approx(60 * time["seconds_per_step"] + 7 * val + 2 * save + startup)
    assert time["low_total_seconds"] == pytest.approx(60 * 5.13 + 7 * val + 2 * save + startup)
    # measured on an H200; the profile is any sm_90+ GPU: said, not hidden
    assert time["gpu"] == "NVIDIA H200" and time["same_gpu"] is False
    # phases and MFU: medians over the recorded steps (step 1, start-up, left out), each naming its file
    gen = statistics.median(m["timing_s/gen"] for s, m in steps.items() if "timing_s/gen" in m and s != first)
    assert time["phases"]["gen"]["median_s"] == pytest.approx(gen)
    assert time["phases"]["gen"]["source"] == reference.CANARY_HOPPER_METRICS
    mfu = statistics.median(m["perf/mfu/actor"] for s, m in steps.items() if "perf/mfu/actor" in m and s != first)
    assert time["mfu"]["perf/mfu/actor"]["median"] == pytest.approx(mfu)


def test_plan_cli_prints_the_range_and_which_gpu_it_was_measured_on(capsys):
    assert main(["plan", CANARY, "--profile", "any-1gpu-hopper"]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "9.5-10.9 min for 60 steps: 5.1-6.6 s/step" in out
    # docs/hardware.md quotes the same range (the figure plan prints, not a second one)
    assert "| 9.5-10.9 min for 60 steps: 5.1-6.6 s/step" in (REPO / "docs" / "hardware.md").read_text()
    assert "7 validation(s) x 2.8 s" in out and "start-up 243 s as recorded" in out
    assert "measured on NVIDIA H200, not this profile's GPU (any NVIDIA GPU (sm_90+))" in out
    assert main(["plan", GRPO, "--profile", "h200-141gb"]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "measured on this profile's GPU model (NVIDIA H200)" in out
    assert "8 validation(s): time not recorded" in out  # the 3B record has no validation
    # its console log has no launch stamp: the start-up it times runs from Ray's start, and plan says so
    console = read_startup(REPO / "docs/bench/gpu-data/hopper-3b-64/variant/verl-console.log.gz")
    assert not console.from_launch and 200 < console.ray_to_ready_s < 300
    assert f"start-up {console.ray_to_ready_s:.0f} s as recorded from Ray's start to verl's 'ready to fit'" in out
    # the A100 figure is a reported run with no console log: its start-up is not in the hours, and plan says why
    assert main(["plan", GRPO, "--profile", "a100-80gb", "--json"]) == 0
    a100 = json.loads(capsys.readouterr().out)["time"]
    assert (a100["startup_seconds"], a100["startup_from"]) == (None, "")
    assert a100["startup"] == "not recorded (the figure's record has no console log of this recipe to time it from)"
    assert "update_actor 26.39" in out and "MFU actor 0.283" in out


POLL_LEVER = ["trainer.v1.sampler.custom_sampler.path=pkg://rlrecipes.verl.replay_poll",
              "trainer.v1.sampler.custom_sampler.name=PollReplayBuffer",
              "+trainer.v1.sampler.sampler_kwargs.poll_interval=0.1"]
VERLS_OWN_SAMPLER = ["trainer.v1.sampler.custom_sampler.path=null", "trainer.v1.sampler.custom_sampler.name=null"]


def test_plan_says_which_replay_buffer_poll_a_hopper_run_waits_on(capsys):
    """verl 0.9.1's V1 trainer (the Hopper image) ends every generation on a replay-buffer poll, every 2 s with
    verl's own sampler: plan names it, takes the interval the poll lever sets (the Hopper profiles' 0.1 s), and
    names none where there is no such trainer (the A100 image's verl 0.8.0) or it is switched off."""
    def poll_text(*args):
        assert main(["plan", *args, "--json"]) == 0
        time = json.loads(capsys.readouterr().out)["time"]
        assert main(["plan", *args]) == 0
        return time["generation_poll_s"], " ".join(capsys.readouterr().out.replace("│", " ").split())

    # the Hopper profiles ship the poll lever (docs/bench/gpu-overhead.md, "The third lever sitting")
    for args in ((), POLL_LEVER):
        poll, out = poll_text(CANARY, "--profile", "any-1gpu-hopper", *args)
        assert poll == 0.1 and "polls every 0.1 s" in out
        assert ("the record was timed polling every 2 s, so this run's generations may each end up to 1.9 s sooner"
                in out)
    # verl's own sampler, the profile's dropped as the DAPO hint says: verl's 2 s
    poll, out = poll_text(CANARY, "--profile", "any-1gpu-hopper", *VERLS_OWN_SAMPLER)
    assert poll == 2.0 and "verl's replay buffer polls every 2 s" in out and "the record was timed" not in out
    poll, out = poll_text(GRPO, "--profile", "a100-80gb")
    assert poll is None and "replay buffer" not in out
    poll, out = poll_text(CANARY, "--profile", "any-1gpu-hopper", "trainer.use_v1=false")
    assert poll is None and "replay buffer" not in out


@pytest.mark.parametrize("interval", ["abc", "nan", "0", "11", "null"])
def test_plan_refuses_a_poll_sampler_without_a_usable_interval(capsys, interval):
    """The poll lever's sampler named with an interval it would refuse inside verl (rlrecipes/verl/replay_poll.py,
    the same bound: rlrecipes.verl.specs.poll_seconds) is one line of error naming the key, exit 2."""
    extra = [f"+trainer.v1.sampler.sampler_kwargs.poll_interval={interval}"]
    code = main(["plan", CANARY, "--profile", "any-1gpu-hopper", *POLL_LEVER[:2], *extra])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "trainer.v1.sampler.sampler_kwargs.poll_interval: PollReplayBuffer needs seconds between polls" in err


@pytest.mark.parametrize(("steps", "test_freq", "before", "count"), [
    (60, 10, True, 7),    # before training, then 10, 20, ..., 60
    (35, 5, True, 8),
    (7, 5, False, 2),     # step 5 and the last step, 7
    (10, 0, True, 1),     # test_freq 0: only the one before training
    (10, -1, False, 0),
])
def test_validation_count_follows_verl(steps, test_freq, before, count):
    assert timing.validation_count(steps, test_freq, before) == count


def test_plan_counts_validations_from_the_run_config():
    run = resolve(CANARY, profile="any-1gpu-hopper", overrides=["trainer.val_before_train=false",
                                                                 "trainer.total_training_steps=25"])
    plan = build_plan(run)
    assert plan.schedule.validations == 3 and plan.time.validations == 3  # 10, 20 and the last, 25


def test_a_record_without_a_machine_readable_run_says_not_recorded(capsys):
    time = plan_time("a100-80gb")
    assert time["low_seconds_per_step"] is None and time["recorded_mean_length"] is None
    assert time["validation_seconds"] is None and time["phases"] == {} and time["mfu"] == {}
    assert time["record"].startswith("not recorded: no machine-readable record")
    assert time["low_total_seconds"] is None and time["high_total_seconds"] == pytest.approx(206.0 * 35)
    assert main(["plan", GRPO, "--profile", "a100-80gb"]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "mean length is not recorded: no lower figure" in out and "time not recorded" in out


def test_a_record_whose_file_is_missing_says_so():
    t = dataclasses.replace(THROUGHPUTS[1], metrics="docs/bench/gpu-data/no-such-run/metrics.jsonl")
    assert timing.recorded_run(t) == ("not recorded: docs/bench/gpu-data/no-such-run/metrics.jsonl is not in "
                                         "this install (a checkout of the repository has it)")


def test_a_fixture_record_gives_the_range_from_its_own_metrics(tmp_path, monkeypatch):
    # four steps: step 1 (start-up) slow and long, step 3 validates; steady steps 2 and 4 generated 100 and 300
    lines = [{"step": 1, "data": {"timing_s/step": 99.0, "timing_s/gen": 50.0, "response_length/mean": 1000.0}},
             {"step": 2, "data": {"timing_s/step": 10.0, "timing_s/gen": 4.0, "response_length/mean": 100.0,
                                  "perf/mfu/actor": 0.2}},
             {"step": 3, "data": {"timing_s/step": 30.0, "timing_s/gen": 5.0, "timing_s/testing": 20.0,
                                  "response_length/mean": 200.0, "perf/mfu/actor": 0.4}},
             {"step": 4, "data": {"timing_s/step": 10.0, "timing_s/gen": 6.0, "response_length/mean": 300.0,
                                  "perf/mfu/actor": 0.3}}]
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    monkeypatch.setenv("RLRECIPES_HOME", str(tmp_path))
    t = dataclasses.replace(THROUGHPUTS[1], value=10.0, responses_per_step=10, max_response_length=400,
                            metrics="m.jsonl")
    monkeypatch.setattr(reference, "THROUGHPUTS", (t,))
    fused = {"actor_rollout_ref.model.use_fused_kernels": True}.get
    time = timing.estimate_time(GRPO, "h200-141gb", "Qwen/Qwen2.5-3B-Instruct", fused, 1, 1, 20, 400, 5,
                                   profile_gpu="NVIDIA H100 80GB HBM3", validations=2, saves=1)
    # measured: 10 s for 10 responses of 200 tokens on average; this run: 20 responses of up to 400
    assert time.recorded_mean_length == 200.0
    assert time.seconds_per_step == pytest.approx(10.0 * 20 * 400 / (10 * 200))
    assert time.low_seconds_per_step == pytest.approx(20.0) and 20.0 < time.seconds_per_step
    assert time.validation_seconds == 20.0 and time.save_seconds is None
    assert time.high_total_seconds == pytest.approx(5 * 40.0 + 2 * 20.0)  # the save's time is not recorded
    assert time.low_total_seconds == pytest.approx(5 * 20.0 + 2 * 20.0)
    assert time.phases["gen"]["median_s"] == 5.0 and time.mfu["perf/mfu/actor"]["median"] == 0.3
    assert time.same_gpu is False and time.gpu == "NVIDIA H200"
    # a run whose maximum is below the recorded mean gets no lower figure than its maximum's
    short = timing.estimate_time(GRPO, "h200-141gb", "Qwen/Qwen2.5-3B-Instruct", fused, 1, 1, 20, 100, 5)
    assert short.low_seconds_per_step == pytest.approx(short.seconds_per_step)


def test_plan_shows_what_the_canarys_step_cost_on_other_hosts(capsys):
    """The canary's figure is one H200 host's; its later runs on three H100 hosts (the recovery sittings) took 1x-2x
    that a step with the same recipe and profile. plan shows their range beside the figure, each run's s/step the
    one its own `expect.json` reported (one statistic, not a second reading of the same logs)."""
    time = plan_time("any-1gpu-hopper", recipe=CANARY)
    hosts = time["hosts"]
    assert [h["source"].split("/")[3] for h in hosts] == [f"recovery-faults-hopper-{n}" for n in (4, 5, 6)]
    for host in hosts:
        written = json.loads((REPO / host["source"] / "expect.json").read_text())
        (step,) = [c for c in written["checks"] if c["name"].startswith("s/step")]
        assert step["value"] == f"{host['seconds_per_step']:.2f} s ({host['steps']} steps)"
        assert host["gpu"] == written["gpu"] == "NVIDIA H100 80GB HBM3"
    assert main(["plan", CANARY, "--profile", "any-1gpu-hopper"]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert ("on other hosts the same recipe and profile took 5.30-9.59 s/step (3 run(s), one host each: NVIDIA H100 "
            "80GB HBM3;") in out
    hardware = " ".join((REPO / "docs" / "hardware.md").read_text().split())
    assert "**5.30-9.59 s/step** for the canary" in hardware  # the same range, quoted
    # the PPO canary's figure (one H100 host's, cut at step 71) beside its seeds 1 and 2 on two other H100 hosts
    ppo_hosts = plan_time("any-1gpu-hopper", recipe="canary-ppo")["hosts"]
    assert len(ppo_hosts) == 2
    for ppo in ppo_hosts:
        written = json.loads((REPO / ppo["source"] / "expect.json").read_text())
        (step,) = [c for c in written["checks"] if c["name"].startswith("s/step")]
        assert step["value"].startswith(f"{ppo['seconds_per_step']:.2f} s ({ppo['steps']} steps)")
        assert ppo["steps"] == 89
    assert main(["plan", "canary-ppo", "--profile", "any-1gpu-hopper"]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "on other hosts the same recipe and profile took 4.17-5.04 s/step (2 run(s), one host each: NVIDIA H100" in out
    assert "**4.17-5.04 s/step** for the PPO canary" in hardware  # the same range, quoted
    # another recipe on a record of the canary's model size has no hosts of its own; nor has a record without any
    assert plan_time("h200-141gb")["hosts"] == ()
    # a host folder this install lacks (an image without docs/) is left out, not an error
    t = dataclasses.replace(reference.record("h200-canary-grpo-lora-hopper-step"),
                            hosts=(("docs/bench/gpu-data/no-such-run/logs", "NVIDIA H100 80GB HBM3"),
                                   (hosts[0]["source"], hosts[0]["gpu"])))
    assert [h["source"] for h in timing.other_hosts(t)] == [hosts[0]["source"]]

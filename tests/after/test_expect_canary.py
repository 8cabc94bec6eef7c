"""`rlrecipes expect` on the learning canary's real GPU runs (docs/bench/gpu-canary.md): the shipped and
swept settings are met, both shuffled-reward controls and the unpatched first GPU run are missed -- each
for the reasons a broken run would show (flat accuracy, flat reward, a merged model that is not the
trained one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlrecipes.cli import main

CANARY = Path(__file__).resolve().parents[2] / "docs" / "bench" / "gpu-data" / "canary"
MET, MISSED, NM = "met", "missed", "not measured"
# check name prefix -> position in the expected tuple below
CHECKS = ("accuracy before", "accuracy after", "accuracy gain", "training reward rises", "merged model scores",
          "s/step on any-1gpu")

RUNS = [
    # run, recipe, exit, statuses in CHECKS order, the after-accuracy the log shows
    ("g3e4", "canary-grpo-lora", 0, (MET, MET, MET, MET, MET, MET), "0.5293 at step 100 (11 validations)"),
    ("g1e3", "canary-grpo-lora", 0, (MET, MET, MET, MET, MET, MET), "0.5312 at step 100 (11 validations)"),
    ("ppo1e5", "canary-ppo", 0, (MET, MET, MET, MET, MET, MET), "0.4902 at step 100 (11 validations)"),
    ("ppo3e6", "canary-ppo", 0, (MET, MET, MET, MET, MET, MET), "0.4473 at step 100 (11 validations)"),
    # negative controls: the reward ignores the answer; the step-0 "accuracy" is the control reward's rate
    ("shuf3e4", "canary-grpo-lora", 1, (MET, MISSED, MISSED, MISSED, MISSED, MET), "0.2305 at step 100 (11 validations)"),
    ("shuf1e3", "canary-grpo-lora", 1, (MET, MISSED, MISSED, MISSED, MISSED, MET), "0.2910 at step 100 (11 validations)"),
]


def judge(capsys, args: list[str]) -> tuple[int, dict[str, dict]]:
    # the runs of docs/bench/gpu-canary.md ran on an H200: their cost is compared with the H200 reference
    code = main(["expect", *args, "--profile", "any-1gpu", "--gpu", "NVIDIA H200", "--json"])
    result = json.loads(capsys.readouterr().out)
    checks = {}
    for prefix in CHECKS + ("peak memory",):
        (hit,) = [c for c in result["checks"] if c["name"].startswith(prefix)]
        checks[prefix] = hit
    return code, checks


@pytest.mark.parametrize("run, recipe, code, statuses, after", RUNS, ids=[r[0] for r in RUNS])
def test_real_canary_runs_are_judged(capsys, run, recipe, code, statuses, after):
    (log,) = (CANARY / run).glob("console-*.log")
    got, checks = judge(capsys, ["--log", str(log), "--recipe", recipe, "--eval", str(CANARY / run)])
    assert got == code
    assert tuple(checks[name]["status"] for name in CHECKS) == statuses
    assert checks["accuracy after"]["value"] == after
    assert checks["peak memory"]["status"] == NM


def test_merged_model_that_is_not_the_trained_one_is_caught(capsys):
    """shuf3e4's merged model scores 2.1 % where verl's last validation (of the control reward) read 0.23."""
    (log,) = (CANARY / "shuf3e4").glob("console-*.log")
    _, checks = judge(capsys, ["--log", str(log), "--recipe", "canary-grpo-lora", "--eval", str(CANARY / "shuf3e4")])
    assert checks["merged model scores"]["value"].startswith("0.0215 on 512 problems vs 0.2305")


def test_unpatched_rollout_is_missed_without_an_eval(capsys):
    """The first GPU run, before the rollout-position-ids fix: every response garbage, reward 0."""
    (log,) = (CANARY / "first-call-unpatched").glob("console-*.log")
    code, checks = judge(capsys, ["--log", str(log), "--recipe", "canary-grpo-lora"])
    assert code == 1
    assert [checks[n]["status"] for n in CHECKS] == [MISSED, MISSED, MISSED, MISSED, NM, MET]
    assert checks["training reward rises"]["value"].startswith("+0.0000")


def test_canary_log_judged_against_another_recipe_is_bad_input(capsys, tmp_path):
    (log,) = (CANARY / "g3e4").glob("console-*.log")
    out = tmp_path / "result.json"
    assert main(["expect", "--log", str(log), "--recipe", "canary-ppo", "--profile", "any-1gpu",
                 "--out", str(out)]) == 2
    assert "canary-grpo-lora" in capsys.readouterr().err
    assert not out.exists()

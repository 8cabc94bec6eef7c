"""The canary's figures, wherever the README, the docs and the recipes quote them, are the figures of its
record (docs/bench/gpu-data/canary/): a quoted number that drifts from the raw data fails here."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest

from rlrecipes.after.expect import steady_step_times
from rlrecipes.recipe.load import load_recipe
from rlrecipes.reference import REFERENCE_CURVES
from rlrecipes.verl.run_metrics import load_run

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "docs" / "bench" / "gpu-data" / "canary"
RUNS = ("g3e4", "g1e3", "ppo1e5", "ppo3e6", "shuf3e4", "shuf1e3")
VAL = "val-core/openai/gsm8k/reward/mean@1"


def record(run: str) -> dict:
    (log,) = (DATA / run).glob("console-*.log")
    metrics = load_run(None, [str(log)])
    _, val = metrics.series(VAL)
    _, steps = metrics.series("timing_s/step")
    xs, reward = metrics.series("critic/score/mean")
    by_step = dict(zip(xs, reward))
    merged = json.loads((DATA / run / "eval-summary.json").read_text())["fast_eval"]["trained"]["accuracy"]
    return {"first_val": val[0], "last_val": val[-1], "peak_val": max(val), "median_step": statistics.median(steps),
            "merged": merged, "reward_first10": statistics.mean(by_step[s] for s in range(1, 11)),
            "reward_last10": statistics.mean(by_step[s] for s in range(91, 101))}


RECORDS = {run: record(run) for run in RUNS}
START = json.loads((DATA / "canary-manifest.json").read_text())["start"]["accuracy"]


def pct(x: float) -> str:
    return f"{100 * x:.1f}"


def test_the_results_table_is_the_record():
    text = (REPO / "docs" / "bench" / "gpu-canary.md").read_text()
    for run, rec in RECORDS.items():
        (row,) = [line for line in text.splitlines() if line.startswith(f"| {run} ")]
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[-1] == f"{rec['median_step']:.2f}", (run, cells[-1])
        assert cells[-2].strip("*") == f"{pct(rec['merged'])} %", (run, cells[-2])
        assert cells[3] == f"{rec['reward_first10']:.3f} -> {rec['reward_last10']:.3f}", (run, cells[3])
        if not run.startswith("shuf"):  # the controls' validation reads their own reward, quoted as such
            assert f"{rec['first_val']:.3f} -> " in cells[2] and f"{rec['last_val']:.3f}" in cells[2], (run, cells[2])
    assert f"**{pct(START)} %**" in text


def test_the_readme_quotes_the_record():
    text = (REPO / "README.md").read_text()
    (bullet,) = [b for b in text.split("\n- ") if b.startswith("**It learns**")]
    merged = {pct(r["merged"]) for r in RECORDS.values()}
    last = {f"{r['last_val']:.3f}" for r in RECORDS.values()}
    percents = re.findall(r"(\d+\.\d) %", bullet)
    fractions = re.findall(r"\b(0\.\d{3})\b", bullet)
    assert percents and fractions
    assert set(percents) <= merged | {pct(START)}, set(percents) - merged
    assert set(fractions) <= last, set(fractions) - last
    assert f"from {pct(START)} % to {pct(RECORDS['g3e4']['merged'])} %" in bullet


@pytest.mark.parametrize("recipe", ["canary-grpo-lora", "canary-ppo"])
def test_the_contracts_step_time_is_the_shipped_runs_steady_mean(recipe):
    """expect compares a run's steady-state mean s/step with the contract: the contract is that same figure
    of the run the recipe's reference curve is (its shipped settings)."""
    curve = REFERENCE_CURVES[recipe]
    xs, ys = steady_step_times(load_run(None, [str(REPO / curve.log)]))
    figure = load_recipe(recipe).expect.profiles["any-1gpu"].seconds_per_step
    assert figure.value == round(sum(ys) / len(ys), 1), (recipe, figure.value, sum(ys) / len(ys))
    assert figure.source == curve.source
    text = (REPO / "docs" / "expect.md").read_text()
    assert f"{load_recipe('canary-grpo-lora').expect.profiles['any-1gpu'].seconds_per_step.value} / " \
           f"{load_recipe('canary-ppo').expect.profiles['any-1gpu'].seconds_per_step.value} s/step" in text

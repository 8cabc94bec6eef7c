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

REPO = Path(__file__).resolve().parents[2]
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


# ---- the canary on the Hopper stack (docs/bench/gpu-data/canary-hopper/): the lone run and its control ----
HOPPER = REPO / "docs" / "bench" / "gpu-data" / "canary-hopper"
VAL_09 = "val-aux/openai/gsm8k/reward/mean@1"  # verl 0.9.1's name for the validation reward


def hopper_record(run: str) -> dict:
    logs = HOPPER / run / "logs" / "canary-grpo-lora"
    (log,) = logs.glob("metrics-*.jsonl")
    metrics = load_run(None, [str(log)])
    val_steps, val = metrics.series(VAL_09)
    _, corr = metrics.series("training/rollout_actor_probs_pearson_corr")
    _, steady = steady_step_times(metrics)
    _, peak = metrics.series("actor/perf/max_memory_allocated_gb")
    stages = json.loads((logs / "reproduce.json").read_text())["stages"]
    fast = json.loads((HOPPER / run / "merged" / "eval" / "eval-summary.json").read_text())["fast_eval"]
    return {"val": dict(zip(val_steps, val)), "worst_corr": min(corr), "steady": sum(steady) / len(steady),
            "peak": max(peak), "stages": {k: v["seconds"] for k, v in stages.items()},
            "total": sum(v["seconds"] for v in stages.values()), "merged": fast["trained"]["accuracy"],
            "base": fast["baseline"]["accuracy"], "expect": stages["expect"]["exit"]}


CANARY, FROZEN = hopper_record("canary"), hopper_record("frozen-20")


def test_the_hopper_contract_is_the_record():
    """The any-1gpu-hopper figures of canary-grpo-lora: s/step is the canary's steady mean, the memory the
    uninstrumented control's peak (the canary's own is lowered by the per-phase probe's resets)."""
    from rlrecipes import reference

    hopper = load_recipe("canary-grpo-lora").expect.profiles["any-1gpu-hopper"]
    record = reference.record(hopper.seconds_per_step.ref)  # the contract refers to the record, as plan does
    assert record.value == round(CANARY["steady"], 2) and record.metrics == hopper.seconds_per_step.source
    assert hopper.peak_memory_gib.value == round(FROZEN["peak"], 2)
    assert CANARY["peak"] < FROZEN["peak"]  # why the memory figure is not the canary's own
    assert "canary-hopper/canary/" in hopper.seconds_per_step.source
    assert "canary-hopper/frozen-20/" in hopper.peak_memory_gib.source
    assert CANARY["expect"] == 0 and FROZEN["expect"] == 1


def test_the_hopper_figures_are_quoted_from_the_record():
    val = CANARY["val"]
    table = (REPO / "docs" / "bench" / "gpu-canary.md").read_text()
    (row,) = [line for line in table.splitlines() if line.startswith("| canary | 60 ")]
    assert " -> ".join(f"{val[s]:.3f}" for s in sorted(val)).replace(f"{val[60]:.3f}", f"**{val[60]:.3f}**") in row
    assert f"**{pct(CANARY['merged'])} %**" in row and f"| {CANARY['steady']:.2f} |" in row
    assert f"**{CANARY['total']:.1f} s** ({CANARY['total'] / 60:.1f} min)" in row
    (control,) = [line for line in table.splitlines() if line.startswith("| frozen-20 (control) | 20 ")]
    assert f"**{pct(FROZEN['merged'])} %**" in control and f"**{FROZEN['worst_corr']:.3f}**" in control
    words = {"train": "training"}
    for name, seconds in CANARY["stages"].items():
        assert f"{words.get(name, name)} {seconds:.1f} s" in " ".join(table.split()), name

    readme = (REPO / "README.md").read_text()
    (bullet,) = [b for b in readme.split("\n- ") if b.startswith("**It learns with vLLM rollout**")]
    for figure in (f"{CANARY['total']:.1f} s", f"from {val[0]:.3f} to {val[60]:.3f} in 60 steps",
                   f">= {CANARY['worst_corr']:.4f}", f"{pct(CANARY['merged'])} % against verl's last "
                   f"{pct(val[60])} %", f"{CANARY['steady']:.2f} s a step"):
        assert figure in " ".join(bullet.split()), figure
    quick = " ".join(readme.split("## How a run is put together")[0].split())
    assert f"{CANARY['total'] / 60:.1f} minutes from nothing and raised held-out accuracy from " \
           f"{pct(val[0])} % to {pct(val[60])} %" in quick
    expect_md = " ".join((REPO / "docs" / "expect.md").read_text().split())
    assert f"to its verdict in {CANARY['total']:.1f} s: assets {CANARY['stages']['assets']:.1f} s, training " \
           f"{CANARY['stages']['train']:.1f} s" in expect_md
    hardware = (REPO / "docs" / "hardware.md").read_text()
    (row,) = [line for line in hardware.splitlines() if line.startswith("| canary-grpo-lora | `any-1gpu-hopper`")]
    assert f"{CANARY['total']:.1f} s" in row and f"{val[0]:.3f} -> {val[60]:.3f}" in row
    assert f"{CANARY['steady']:.2f} s a step" in row

"""The P40 recipe's memory figures, where the README and docs quote them, are the planner's output for the
recipe as shipped and the GPU fit's record (docs/bench/gpu-data/fit-p40-ppo-cap24.json). The docs quote
the planner's live tensors (its total less the 0.5 GiB CUDA context), which is what the measured
`max_memory_allocated` counts; `rlrecipes plan` prints the total."""

from __future__ import annotations

import json
from pathlib import Path

from rlrecipes.plan.memory import CONTEXT_GIB, estimate_memory
from rlrecipes.recipe.load import resolve

REPO = Path(__file__).resolve().parents[2]
FIT = json.loads((REPO / "docs" / "bench" / "gpu-data" / "fit-p40-ppo-cap24.json").read_text())
FIT_3B = json.loads((REPO / "docs" / "bench" / "gpu-data" / "fit-a100-grpo-lora-3b-cap80.json").read_text())
# planner phase -> the fit's phase name
PHASES = {"rollout": "rollout", "log_prob": "old_log_prob", "update_actor": "update_actor",
          "update_critic": "update_critic"}


def planner_tensors(fit: dict = FIT) -> dict[str, str]:
    """The planner's live tensors per phase for the settings the fit ran (the P40 recipe as shipped; the 3B
    recipe's training side with the fit's profile and overrides)."""
    run = resolve(fit["recipe"], profile=fit.get("profile"), overrides=fit.get("overrides", []), env={})
    estimate = estimate_memory(run)
    return {phase: f"{estimate.phase_gib(phase) - CONTEXT_GIB:.2f}" for phase in PHASES if phase in estimate.phases}


def measured(fit: dict = FIT) -> dict[str, str]:
    return {phase: f"{fit['phase_peaks_gib'][name]['allocated']:.2f}" for phase, name in PHASES.items()
            if name in fit["phase_peaks_gib"]}


def table(heading: str) -> dict[str, list[str]]:
    text = (REPO / "docs" / "bench" / "preflight.md").read_text()
    section = text.split(heading, 1)[1].split("###", 1)[0]
    rows = [[c.strip().strip("*") for c in line.strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| ") and "GiB" not in line and "---" not in line]
    return {row[0].split(" ")[0]: row for row in rows}


def test_the_3b_training_side_table_is_the_planner_and_the_fit():
    by_phase, planned, seen = table("### qwen2.5-3b-gsm8k-grpo-lora training side"), planner_tensors(FIT_3B), \
        measured(FIT_3B)
    for phase in ("rollout", "log_prob", "update_actor"):
        assert by_phase[phase][1] == seen[phase] and by_phase[phase][4].split(" ")[0] == planned[phase], phase
    summary = (REPO / "docs" / "benchmarks.md").read_text()
    assert f"{float(planned['update_actor']):.1f} vs {float(seen['update_actor']):.1f} GiB" in summary


def test_the_preflight_record_table_is_the_planner_and_the_fit():
    by_phase = table("### qwen2.5-0.5b-gsm8k-ppo")
    planned, seen = planner_tensors(), measured()
    for phase in PHASES:
        row = by_phase[phase]
        assert row[1] == seen[phase], (phase, row[1], seen[phase])
        assert row[4].split(" ")[0] == planned[phase], (phase, row[4], planned[phase])
    assert by_phase["peak"][1] == seen["update_actor"] and by_phase["peak"][4] == planned["update_actor"]


def test_the_readme_and_the_summary_quote_the_same_pair():
    planned, seen = planner_tensors()["update_actor"], measured()["update_actor"]
    total = f"{float(planned) + CONTEXT_GIB:.2f}"
    readme = (REPO / "README.md").read_text()
    assert f"peak {seen} GiB allocated" in readme and f"says {planned} GiB of tensors ({total} GiB" in readme
    summary = (REPO / "docs" / "benchmarks.md").read_text()
    assert f"{planned} vs {seen} GiB" in summary
    assert f"{planned} vs {seen} GiB" in (REPO / "docs" / "bench" / "preflight.md").read_text()

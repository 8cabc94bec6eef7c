"""The P40 recipe's memory figures, where the README and docs quote them, are the planner's output for the
recipe as shipped and the GPU fit's record (docs/bench/gpu-data/fit-p40-ppo-cap24.json). The docs quote
the planner's live tensors (its total less the 0.5 GiB CUDA context), which is what the measured
`max_memory_allocated` counts; `rlrecipes plan` prints the total."""

from __future__ import annotations

import json
from pathlib import Path

from rlrecipes.memory import CONTEXT_GIB, estimate_memory
from rlrecipes.recipe import resolve

REPO = Path(__file__).resolve().parents[1]
FIT = json.loads((REPO / "docs" / "bench" / "gpu-data" / "fit-p40-ppo-cap24.json").read_text())
# planner phase -> the fit's phase name
PHASES = {"rollout": "rollout", "log_prob": "old_log_prob", "update_actor": "update_actor",
          "update_critic": "update_critic"}


def planner_tensors() -> dict[str, str]:
    estimate = estimate_memory(resolve("qwen2.5-0.5b-gsm8k-ppo", env={}))
    return {phase: f"{estimate.phase_gib(phase) - CONTEXT_GIB:.2f}" for phase in PHASES}


def measured() -> dict[str, str]:
    return {phase: f"{FIT['phase_peaks_gib'][name]['allocated']:.2f}" for phase, name in PHASES.items()}


def test_the_preflight_record_table_is_the_planner_and_the_fit():
    text = (REPO / "docs" / "bench" / "preflight.md").read_text()
    section = text.split("### qwen2.5-0.5b-gsm8k-ppo", 1)[1].split("###", 1)[0]
    rows = [[c.strip().strip("*") for c in line.strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| ") and "GiB" not in line and "---" not in line]
    by_phase = {row[0].split(" ")[0]: row for row in rows}
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

"""benchmarks/algorithm_matrix.py: the algorithm matrix's table and plot, read from real recorded canary logs
(the GRPO canary on the Hopper stack, verl 0.9.1, and the PPO canary with the HF rollout, verl 0.5.0, whose
validation metric has another name)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "docs" / "bench" / "gpu-data"
SCRIPT = REPO / "benchmarks" / "algorithm_matrix.py"
RUNS = {"grpo/0": DATA / "canary-hopper" / "canary" / "logs" / "canary-grpo-lora",
        "grpo/0r": DATA / "recovery-hopper" / "logs",
        "ppo-hf/1e5": DATA / "canary" / "ppo1e5", "ppo-hf/3e6": DATA / "canary" / "ppo3e6"}


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


matrix = load("algorithm_matrix")


def test_each_run_is_read_as_its_verl_logs_it():
    from rlrecipes.verl.run_metrics import load_run

    shipped = matrix.read("grpo/0", str(RUNS["grpo/0"]))
    run = load_run(str(RUNS["grpo/0"]), None)
    steps, values = run.logged("val-aux/openai/gsm8k/reward/mean@1")  # verl 0.9.1's name for the contract's
    assert shipped.accuracy == list(zip(steps, values)) and shipped.accuracy[0][0] == 0
    assert shipped.reward_w10 == load("reward_trend").trend(*run.logged("critic/score/mean"))["w10"]
    hf = matrix.read("ppo-hf/1e5", str(RUNS["ppo-hf/1e5"]))
    assert hf.accuracy == list(zip(*load_run(str(RUNS["ppo-hf/1e5"]), None).logged(matrix.ACCURACY)))
    assert hf.peak_gib is None and hf.seconds_per_step > 0


def test_the_table_groups_seeds_by_algorithm_and_the_plot_is_written(tmp_path):
    plot = tmp_path / "img" / "algorithms.png"
    done = subprocess.run([sys.executable, str(SCRIPT), *(f"{k}={v}" for k, v in RUNS.items()), "--plot", str(plot)],
                          capture_output=True, text=True, check=True)
    rows = [line.split(" | ") for line in done.stdout.splitlines()[2:]]
    assert [r[0].strip("| ") for r in rows] == ["grpo", "ppo-hf"] and rows[0][1] == "0, 0r"
    runs = [matrix.read(k, str(v)) for k, v in RUNS.items()]
    after = [r.accuracy[-1][1] for r in runs[:2]]
    assert rows[0][3] == f"{sum(after) / 2:.3f} ({min(after):.3f} to {max(after):.3f})"
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and [p.name for p in plot.parent.iterdir()] == [plot.name]


@pytest.mark.parametrize("given, message", [("grpo=/x", "give ALGORITHM/SEED=LOG_DIR"),
                                            ("grpo/1", "give ALGORITHM/SEED=LOG_DIR")])
def test_a_run_is_named_algorithm_slash_seed(given, message):
    done = subprocess.run([sys.executable, str(SCRIPT), given], capture_output=True, text=True)
    assert done.returncode == 2 and message in done.stderr


def test_a_run_without_the_validation_metric_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="no val-core/openai/gsm8k/acc_nowhere/mean@1"):
        matrix.read("grpo/0", str(RUNS["grpo/0"]), "val-core/openai/gsm8k/acc_nowhere/mean@1")

"""benchmarks/reward_trend.py: the reward statistics a canary contract could judge with, and the table of the
recorded runs that docs/bench/gpu-canary.md shows."""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "reward_trend.py"
spec = importlib.util.spec_from_file_location("reward_trend", SCRIPT)
reward_trend = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reward_trend)


def test_each_statistic_of_a_known_series():
    xs = list(range(1, 41))
    ys = [0.2 + 0.005 * x for x in xs]  # a straight rise: 0.005 a step
    t = reward_trend.trend(xs, ys)
    assert math.isclose(t["slope"], 0.005) and math.isclose(t["fitted"], 0.005 * 39)
    assert math.isclose(t["w10"], 0.005 * 30) and math.isclose(t["w20"], 0.005 * 20)  # windows 30 and 20 apart
    flat = reward_trend.trend(xs[:15], [0.3] * 15)
    assert flat["slope"] == 0 and flat["w5"] == 0 and math.isnan(flat["w10"]) and math.isnan(flat["w20"])


def test_the_canary_record_holds_the_table_the_script_prints():
    printed = subprocess.run([sys.executable, str(SCRIPT), "--recorded"], capture_output=True, text=True,
                             check=True).stdout
    assert printed.count("\n") == 2 + len(reward_trend.RECORDED)
    assert printed in (REPO / "docs" / "bench" / "gpu-canary.md").read_text()


def test_runs_are_named_label_equals_folder(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2 and "give LABEL=LOG_DIR" in done.stderr


def _fitted_contract(home: Path, rise_min: float) -> None:
    """canary-grpo-lora with its reward check as `statistic: fitted` (a scratch copy of the recipes as
    RLRECIPES_HOME, no docs: as in an image)."""
    import shutil

    import yaml

    shutil.copytree(REPO / "recipes", home / "recipes")
    path = home / "recipes" / "canary-grpo-lora.yaml"
    data = yaml.safe_load(path.read_text())
    data["expect"]["reward"] = {"metric": "critic/score/mean", "statistic": "fitted", "min_steps": 20,
                                "rise_min": rise_min}
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def _reward_check(capsys, folder: str) -> dict:
    import json

    from rlrecipes.cli import main

    main(["expect", str(REPO / folder), "--recipe", "canary-grpo-lora", "--profile", "any-1gpu-hopper", "--json"])
    (check,) = [c for c in json.loads(capsys.readouterr().out)["checks"] if c["name"].startswith("training reward")]
    return check


def test_the_contract_fitted_statistic_reads_what_the_table_reads(tmp_path, monkeypatch, capsys):
    """`expect.reward.statistic: fitted` judges a run by the same least-squares line the table prints: the run
    cut at step 27 (under 0.10 on the 10-step windows) reads +0.151 and is met at 0.10, a control is missed, and a
    run that logged fewer steps than min_steps is not measured."""
    monkeypatch.setenv("RLRECIPES_HOME", str(tmp_path))
    _fitted_contract(tmp_path, 0.10)
    cut_run = reward_trend.RECORDED["volume filled, save of step 10 failed (recovery-faults-hopper-3)"]
    cut = _reward_check(capsys, cut_run)
    assert cut["status"] == "met" and cut["value"].startswith("+0.1511 (+0.00581 a step over steps 1-27)"), cut
    assert cut["name"].startswith("training reward rises (least-squares line over every logged step")
    control = _reward_check(capsys, reward_trend.RECORDED["control: shuffled reward (canary-vllm/shuffled)"])
    assert control["status"] == "missed" and control["value"].startswith("-0.017"), control
    (tmp_path / "recipes" / "canary-grpo-lora.yaml").write_text(
        (tmp_path / "recipes" / "canary-grpo-lora.yaml").read_text().replace("min_steps: 20", "min_steps: 28"))
    short = _reward_check(capsys, cut_run)
    assert short["status"] == "not measured" and short["detail"] == "27 step(s) logged it; needs 28", short

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

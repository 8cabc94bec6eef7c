"""How a canary's training reward rose, by each statistic a contract could judge it with, for the runs named on
the command line: the mean of the last k logged steps minus the first k (the shipped `expect.reward` check, k
= 5, 10, 20), and the least-squares slope over every logged step, per step and times the steps it spans. Prints
the Markdown table docs/bench/gpu-canary.md shows ("Which reward statistic", held to this output by
tests/after/test_reward_trend.py). Read with rlrecipes' own run loader (rlrecipes.verl.run_metrics), as
`rlrecipes expect` reads a run.

    .venvs/dev/bin/python benchmarks/reward_trend.py LABEL=LOG_DIR [LABEL=LOG_DIR ...] [--metric critic/score/mean]
    .venvs/dev/bin/python benchmarks/reward_trend.py --recorded      # the recorded Hopper runs and controls
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rlrecipes.after.expect import fitted_rise  # noqa: E402  (the contract's `statistic: fitted`)
from rlrecipes.verl.run_metrics import load_run  # noqa: E402

DATA = "docs/bench/gpu-data"
# canary-grpo-lora on any-1gpu-hopper: the shipped seed (0), one run of seed 1, and the negative controls
RECORDED = {
    "shipped run": f"{DATA}/canary-hopper/canary/logs/canary-grpo-lora",
    "stopped twice, resumed (recovery-hopper)": f"{DATA}/recovery-hopper/logs",
    "vLLM engine killed at step 5 (recovery-faults-hopper-2)": f"{DATA}/recovery-faults-hopper-2/logs",
    "volume filled, save of step 10 failed (recovery-faults-hopper-3)": f"{DATA}/recovery-faults-hopper-3/logs",
    "seed 1, vLLM engine killed after step 30 (recovery-faults-hopper-4)": f"{DATA}/recovery-faults-hopper-4/logs",
    "vLLM engine killed after step 30 (recovery-faults-hopper-5)": f"{DATA}/recovery-faults-hopper-5/logs",
    "volume filled, save of step 10 failed, to the verdict (recovery-faults-hopper-6)":
        f"{DATA}/recovery-faults-hopper-6/logs",
    "seed 1, today's assets, to its verdict (canary-seeds-hopper-h100-2)":
        f"{DATA}/canary-seeds-hopper-h100-2/logs/seed-1/canary-grpo-lora",
    "seed 2, today's assets, to its verdict (canary-seeds-hopper-h100-2)":
        f"{DATA}/canary-seeds-hopper-h100-2/logs/seed-2/canary-grpo-lora",
    "control: adapter sync cut (canary-hopper/frozen-20)": f"{DATA}/canary-hopper/frozen-20/logs/canary-grpo-lora",
    "control: adapter sync cut (canary-vllm/frozen)": f"{DATA}/canary-vllm/frozen/logs/canary-grpo-lora",
    "control: shuffled reward (canary-vllm/shuffled)": f"{DATA}/canary-vllm/shuffled/logs/canary-grpo-lora",
}
WINDOWS = (5, 10, 20)


def trend(xs: list[int], ys: list[float]) -> dict[str, float]:
    """Each statistic of one run's reward series (NaN where the run is too short for it)."""
    out = {f"w{k}": (sum(ys[-k:]) / k - sum(ys[:k]) / k) if len(ys) >= 2 * k else math.nan for k in WINDOWS}
    out["slope"], out["fitted"] = fitted_rise(xs, ys) if len(xs) >= 3 else (math.nan, math.nan)
    return out


def _cell(value: float, digits: int = 3) -> str:
    return "-" if math.isnan(value) else f"{value:+.{digits}f}"


def table(runs: dict[str, str], metric: str = "critic/score/mean") -> str:
    lines = ["| run | steps logged | " + " | ".join(f"last {k} - first {k}" for k in WINDOWS)
             + " | fitted slope, per step | fitted slope x steps spanned |",
             "|---|---|" + "---|" * (len(WINDOWS) + 2)]
    for label, folder in runs.items():
        xs, ys = load_run(str(REPO / folder) if not Path(folder).is_absolute() else folder, None).logged(metric)
        t = trend(xs, ys)
        lines.append(f"| {label} | {len(xs)} ({xs[0]}-{xs[-1]}) | " + " | ".join(_cell(t[f"w{k}"]) for k in WINDOWS)
                     + f" | {_cell(t['slope'], 4)} | {_cell(t['fitted'])} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="*", metavar="LABEL=LOG_DIR")
    parser.add_argument("--recorded", action="store_true", help="the recorded Hopper canary runs and controls")
    parser.add_argument("--metric", default="critic/score/mean")
    args = parser.parse_args()
    runs = dict(RECORDED) if args.recorded else {}
    for given in args.runs:
        label, _, folder = given.partition("=")
        if not folder:
            parser.error(f"{given!r}: give LABEL=LOG_DIR")
        runs[label] = folder
    if not runs:
        parser.error("no runs: give LABEL=LOG_DIR or --recorded")
    sys.stdout.write(table(runs, args.metric))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

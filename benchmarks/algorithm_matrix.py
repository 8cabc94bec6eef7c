"""The algorithm matrix's table and plot (docs/bench/gpu-algorithms.md): for runs named ALGORITHM/SEED=LOG_DIR,
per algorithm over its seeds -- held-out accuracy before and after (mean, and the range over seeds), the reward
trend (last 10 minus first 10 logged steps, and the fitted slope times the steps it spans, as
benchmarks/reward_trend.py reads them), the median seconds a step, and the trainer's peak memory -- and one
plot of held-out accuracy against step, a line per run, a colour per algorithm. Read with rlrecipes' own run
loader, the validation metric under the name the run's verl logs it (rlrecipes.verl.specs).

    .venvs/dev/bin/python benchmarks/algorithm_matrix.py grpo/1=LOGS rloo/1=LOGS rloo/2=LOGS ... \\
        [--plot docs/bench/img/algorithms.png] [--metric val-core/openai/gsm8k/reward/mean@1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]

from reward_trend import trend  # noqa: E402
from rlrecipes.fsutil import atomic_path  # noqa: E402
from rlrecipes.verl.run_metrics import load_run  # noqa: E402
from rlrecipes.verl.specs import SPECS  # noqa: E402

ACCURACY = "val-core/openai/gsm8k/reward/mean@1"  # the canaries' contract metric (greedy, held-out)
REWARD, STEP_TIME, PEAK = "critic/score/mean", "timing_s/step", "actor/perf/max_memory_allocated_gb"


@dataclass(frozen=True)
class RunFigures:
    algorithm: str
    seed: str
    accuracy: list[tuple[int, float]]  # (step, held-out accuracy) at every validation
    reward_w10: float
    reward_fitted: float
    seconds_per_step: float | None
    peak_gib: float | None


def logged_metric(metric: str, keys) -> str | None:
    """`metric` as this run's verl logs it (0.5.0 and 0.8+ name the validation reward differently)."""
    names = [metric, *(spec.logged_metric(metric) for spec in SPECS.values())]
    return next((name for name in names if name in keys), None)


def read(label: str, folder: str, metric: str = ACCURACY) -> RunFigures:
    algorithm, _, seed = label.partition("/")
    run = load_run(folder, None)
    name = logged_metric(metric, run.keys)
    if name is None:
        raise SystemExit(f"{folder}: no {metric} (nor another verl's name for it) in the run's logs")
    steps, values = run.logged(name)
    xs, ys = run.logged(REWARD)
    t = trend(xs, ys)
    times = run.logged(STEP_TIME)[1]
    peaks = run.logged(PEAK)[1]
    return RunFigures(algorithm, seed, list(zip(steps, values)), t["w10"], t["fitted"],
                      statistics.median(times) if times else None, max(peaks) if peaks else None)


def _spread(values: list[float], digits: int = 3) -> str:
    values = [v for v in values if v == v]  # NaN: too short for the statistic
    if not values:
        return "-"
    mean = sum(values) / len(values)
    return f"{mean:.{digits}f}" if len(values) == 1 else \
        f"{mean:.{digits}f} ({min(values):.{digits}f} to {max(values):.{digits}f})"


def table(runs: list[RunFigures]) -> str:
    lines = ["| algorithm | seeds | held-out accuracy before | after (last validation) | gain | reward, last 10 - "
             "first 10 | reward, fitted slope x steps | s/step (median) | trainer peak GiB |",
             "|---|---|---|---|---|---|---|---|---|"]
    for algorithm in dict.fromkeys(r.algorithm for r in runs):
        mine = [r for r in runs if r.algorithm == algorithm]
        before = [r.accuracy[0][1] for r in mine if r.accuracy]
        after = [r.accuracy[-1][1] for r in mine if r.accuracy]
        gain = [r.accuracy[-1][1] - r.accuracy[0][1] for r in mine if r.accuracy]
        times = [r.seconds_per_step for r in mine if r.seconds_per_step is not None]
        peaks = [r.peak_gib for r in mine if r.peak_gib is not None]
        lines.append(f"| {algorithm} | {', '.join(r.seed for r in mine)} | {_spread(before)} | {_spread(after)} | "
                     f"{_spread(gain)} | {_spread([r.reward_w10 for r in mine])} | "
                     f"{_spread([r.reward_fitted for r in mine])} | {_spread(times, 2)} | "
                     + (f"{max(peaks):.2f}" if peaks else "-") + " |")
    return "\n".join(lines) + "\n"


def plot(runs: list[RunFigures], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {a: f"C{i}" for i, a in enumerate(dict.fromkeys(r.algorithm for r in runs))}
    fig, ax = plt.subplots(figsize=(6.4, 3.8), dpi=110)
    for r in runs:
        xs, ys = zip(*r.accuracy) if r.accuracy else ((), ())
        first = r is next(x for x in runs if x.algorithm == r.algorithm)
        ax.plot(xs, ys, "-o", markersize=3, linewidth=1.3, color=colours[r.algorithm],
                label=r.algorithm if first else None)
    ax.set_title("Held-out accuracy (greedy) against step, a line per seed", fontsize=10)
    ax.set_xlabel("step", fontsize=8)
    ax.set_ylabel("accuracy", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png")
        os.chmod(tmp, 0o644)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="ALGORITHM/SEED=LOG_DIR")
    parser.add_argument("--plot", type=Path, help="write the accuracy plot here (PNG)")
    parser.add_argument("--metric", default=ACCURACY, help="the validation metric, as the contracts name it")
    args = parser.parse_args(argv)
    runs = []
    for given in args.runs:
        label, _, folder = given.partition("=")
        if not folder or "/" not in label:
            parser.error(f"{given!r}: give ALGORITHM/SEED=LOG_DIR")
        runs.append(read(label, folder, args.metric))
    sys.stdout.write(table(runs))
    if args.plot:
        plot(runs, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

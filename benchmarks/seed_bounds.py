"""A contract's outcome bounds, derived from the seed runs and controls its `expect.seeds` block names
(docs/expect.md, "Bounds from seeds"): each run judged as `rlrecipes expect` judges it (rlrecipes.after.expect,
on the block's profile), and for each bounded check the number that decided it on every seed (`Check.measured`),
their mean and spread, the controls' numbers, and the bound the rule gives: halfway between the worst seed and
the nearest control that check is there to fail, rounded toward the control (so the seeds keep at least half the
gap). Prints the Markdown table docs/bench/gpu-canary.md shows ("Bounds from seeds"), held to this output and to
the recipe's bounds by tests/after/test_seed_bounds.py.

    .venvs/dev/bin/python benchmarks/seed_bounds.py canary-grpo-lora
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rlrecipes.after.expect import check_run  # noqa: E402
from rlrecipes.recipe.expect_schema import AccuracyExpect, Expectations, RewardExpect  # noqa: E402
from rlrecipes.recipe.load import load_recipe  # noqa: E402


@dataclass(frozen=True)
class Bounded:
    """One bound a contract derives from its seeds."""
    label: str       # the table's row
    group: str       # of expect_schema.SEEDED_CHECKS: which controls count for it
    side: str        # min: the seeds are above it; max: below it
    grid: float      # the bound is rounded toward the controls to a multiple of this
    contract: float  # the recipe's bound today


def bounded(expect: Expectations) -> list[Bounded]:
    """The bounds of `expect` that come from seeds, in the order a verdict lists their checks."""
    out = []
    if isinstance(expect.accuracy, AccuracyExpect):
        if expect.accuracy.after.min is not None:
            out.append(Bounded("accuracy after training", "accuracy", "min", 0.01, expect.accuracy.after.min))
        if expect.accuracy.gain_min is not None:
            out.append(Bounded("accuracy gain", "accuracy", "min", 0.01, expect.accuracy.gain_min))
    if isinstance(expect.reward, RewardExpect):
        out.append(Bounded("training reward rises", "reward", "min", 0.005, expect.reward.rise_min))
    for bound in expect.rollout_agreement if isinstance(expect.rollout_agreement, tuple) else ():
        for side, limit in (("min", bound.min), ("max", bound.max)):
            if limit is not None:
                out.append(Bounded(bound.metric, "rollout_agreement", side, 0.01 if side == "min" else 0.005, limit))
    return out


def measured(recipe: str, profile: str, log: str) -> dict[str, float]:
    """Each bounded check's deciding number in one run, keyed as `bounded` labels them."""
    result = check_run(recipe, profile, run_dir=str(REPO / log))
    out = {}
    for check in result.checks:
        if check.measured is None:
            continue
        key = check.metric if check.metric.startswith("training/rollout_") else check.label
        out[key] = check.measured
    return out


def derive(side: str, grid: float, seeds: list[float], controls: list[float]) -> float | None:
    """Halfway between the worst seed and the nearest control, rounded toward the control; None without one."""
    if not controls:
        return None
    worst, nearest = (min(seeds), max(controls)) if side == "min" else (max(seeds), min(controls))
    middle = (worst + nearest) / 2
    steps = math.floor(middle / grid + 1e-9) if side == "min" else math.ceil(middle / grid - 1e-9)
    return round(steps * grid, 6)


@dataclass(frozen=True)
class Row:
    bound: Bounded
    seeds: dict[int, float]
    controls: dict[str, float]
    derived: float | None


def rows(recipe_name: str) -> list[Row]:
    recipe = load_recipe(recipe_name)
    plan = recipe.expect.seeds
    if plan is None:
        raise SystemExit(f"{recipe_name}: its expect: block names no seed runs (expect.seeds)")
    seed_values = {run.seed: measured(recipe.name, plan.profile, run.log) for run in plan.runs}
    control_values = {c.name: (c, measured(recipe.name, plan.profile, c.log)) for c in plan.controls}
    out = []
    for bound in bounded(recipe.expect):
        key = bound.label
        seeds = {seed: values[key] for seed, values in seed_values.items() if key in values}
        controls = {name: values[key] for name, (control, values) in control_values.items()
                    if bound.group in control.misses and key in values}
        out.append(Row(bound, seeds, controls, derive(bound.side, bound.grid, list(seeds.values()),
                                                      list(controls.values()))))
    return out


def _n(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def table(recipe_name: str) -> str:
    found = rows(recipe_name)
    seeds = sorted({seed for row in found for seed in row.seeds})
    lines = ["| check | " + " | ".join(f"seed {s}" for s in seeds) + " | mean | spread (sd) | controls | "
             "derived bound | contract | margin: worst seed / nearest control |",
             "|---|" + "---|" * len(seeds) + "---|---|---|---|---|---|"]
    for row in found:
        values = list(row.seeds.values())
        signed = row.bound.label in ("accuracy gain", "training reward rises")
        worst = min(values) if row.bound.side == "min" else max(values)
        nearest = (max(row.controls.values()) if row.bound.side == "min" else min(row.controls.values())) \
            if row.controls else None
        limit = row.bound.contract
        # positive: on the side of the bound it belongs (a seed meets it, a control misses it)
        direction = 1 if row.bound.side == "min" else -1
        margins = f"{direction * (worst - limit):+.4f} / " + (
            f"{direction * (limit - nearest):+.4f}" if nearest is not None else "-")
        sign = ">=" if row.bound.side == "min" else "<="
        lines.append(f"| {row.bound.label} | " + " | ".join(_n(row.seeds.get(s), signed) for s in seeds)
                     + f" | {_n(statistics.mean(values), signed)}"
                     + f" | {_n(statistics.stdev(values)) if len(values) > 1 else '-'}"
                     + " | " + ("; ".join(f"{name} {_n(v, signed)}" for name, v in row.controls.items()) or "-")
                     + f" | {sign} {'-' if row.derived is None else f'{row.derived:g}'} | {sign} {limit:g} | {margins} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recipe")
    args = parser.parse_args(argv)
    sys.stdout.write(table(args.recipe))
    return 0


if __name__ == "__main__":
    sys.exit(main())

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
import functools
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


def key(check) -> str:
    """A check's key as `bounded` labels its bound: the metric for rollout agreement (two checks, one name)."""
    return check.metric if check.metric.startswith("training/rollout_") else check.label


@functools.cache
def judged(recipe: str, profile: str, log: str) -> dict:
    """One run's checks, judged as `rlrecipes expect` judges it, by `key`: the bounded ones carry `measured`."""
    return {key(check): check for check in check_run(recipe, profile, run_dir=str(REPO / log)).checks}


def measured(recipe: str, profile: str, log: str) -> dict[str, float]:
    """Each bounded check's deciding number in one run."""
    return {name: check.measured for name, check in judged(recipe, profile, log).items()
            if check.measured is not None}


@dataclass(frozen=True)
class Row:
    bound: Bounded
    seeds: dict[int, float]
    controls: dict[str, float]

    @property
    def worst(self) -> float:
        """The seed closest to the bound."""
        return min(self.seeds.values()) if self.bound.side == "min" else max(self.seeds.values())

    @property
    def nearest(self) -> float | None:
        """The control closest to the bound; None without one."""
        if not self.controls:
            return None
        return max(self.controls.values()) if self.bound.side == "min" else min(self.controls.values())

    @property
    def derived(self) -> float | None:
        """Halfway between the worst seed and the nearest control, rounded toward the control; None without one."""
        if self.nearest is None:
            return None
        middle, grid = (self.worst + self.nearest) / 2, self.bound.grid
        steps = math.floor(middle / grid + 1e-9) if self.bound.side == "min" else math.ceil(middle / grid - 1e-9)
        return round(steps * grid, 6)


def rows(recipe_name: str) -> list[Row]:
    recipe = load_recipe(recipe_name)
    plan = recipe.expect.seeds
    if plan is None:
        raise SystemExit(f"{recipe_name}: its expect: block names no seed runs (expect.seeds)")
    seed_values = {run.seed: measured(recipe.name, plan.profile, run.log) for run in plan.runs}
    control_values = {c.name: (c, measured(recipe.name, plan.profile, c.log)) for c in plan.controls}
    out = []
    for bound in bounded(recipe.expect):
        label = bound.label
        seeds = {seed: values[label] for seed, values in seed_values.items() if label in values}
        controls = {name: values[label] for name, (control, values) in control_values.items()
                    if bound.group in control.misses and label in values}
        out.append(Row(bound, seeds, controls))
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
        worst, nearest, limit = row.worst, row.nearest, row.bound.contract
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

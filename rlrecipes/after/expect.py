"""A run judged against its recipe's expected result (the `expect:` block, parsed by
rlrecipes.recipe.expect_schema when the recipe loads).

The verdict has two parts. The *outcome* -- the steps trained, accuracy before and after, gain, reward
trend, rollout agreement, the merged model against the last step -- decides it: met, or missed. Each of its
checks is `met`, `missed` or `not measured`, and a check the contract requires that was not measured is not
met: a run that stopped early, never validated, or logged what another verl logs proves nothing. Only what
the contract itself declares meaningless there (`{not_measured: why}`, an HF rollout's agreement, a "before"
the recipe never validates) is not required. NaN, inf, or a fraction outside 0..1 read where an accuracy
should be are findings (missed), not skipped values.

The *cost* -- s/step, peak memory -- is shown beside it as a ratio to its reference, which was measured on
one GPU model: compared only with a run on that model, and counted in the verdict only under `--strict`.
`rlrecipes expect` exits 0 when the verdict is met, 1 when missed.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from rlrecipes import reference
from rlrecipes.after.expect_cost import _figure_value, profile_checks, reference_gpus, steady_step_times
from rlrecipes.after.verdict import (MET, MISSED, NOT_MEASURED, OUTCOME, TABLE_HEADER, Check, ExpectResult, RunFacts,
                                     print_table, table_rows, verdict_line)
from rlrecipes.errors import RecipeError
from rlrecipes.recipe.expect_schema import (STEP_TIME, AccuracyExpect, Band, Bound, Expectations, Figure,
                                            MergedExpect, NotMeasured, RewardExpect)

if TYPE_CHECKING:
    from rlrecipes.after.evaluate import FastEval

    FastEvals = dict[str, FastEval] | None  # an eval summary's fast evals by model label; None: no --eval

# what other modules and tests take from here
__all__ = ["MET", "MISSED", "NOT_MEASURED", "OUTCOME", "TABLE_HEADER", "Check", "ExpectResult", "Figure", "NotMeasured",
           "RunFacts", "_figure_value", "check_run", "judge", "print_table", "steady_step_times", "table_rows",
           "verdict_line"]
EVAL_BEFORE, EVAL_AFTER = "baseline", "trained"  # the labels of the two models in an eval summary
# training/rollout_probs_diff_* are averages over response tokens; a batch without any logs valid=0
_ROLLOUT_VALID = "training/rollout_probs_diff_valid"


def _band_text(band: Band) -> str:
    if band.min is not None and band.max is not None:
        text = f"{band.min:.3f} .. {band.max:.3f}"
    elif band.min is not None:
        text = f">= {band.min:.3f}"
    else:
        text = f"<= {band.max:.3f}"
    return text + (f" at step {band.step}" if band.step not in ("", "last", "first") else "")


def _in_band(value: float, band: Band) -> bool:
    return (band.min is None or value >= band.min) and (band.max is None or value <= band.max)


def _at_step(xs: list[int], ys: list[float], step: int | str) -> tuple[int, float] | None:
    if not xs:
        return None
    if step == "first":
        return xs[0], ys[0]
    if step == "last":
        return xs[-1], ys[-1]
    return (step, ys[xs.index(step)]) if step in xs else None


def _steps_text(steps: list[int]) -> str:
    if len(steps) == 1:
        return f"step {steps[0]}"
    if steps == list(range(steps[0], steps[-1] + 1)):
        return f"steps {steps[0]}..{steps[-1]}"
    return "steps " + ", ".join(map(str, steps[:5])) + (", ..." if len(steps) > 5 else "")


def _not_finite(xs: list[int], ys: list[float]) -> list[int]:
    return [x for x, y in zip(xs, ys) if not math.isfinite(y)]


def _accuracy_problem(value: float) -> str | None:
    """Why `value` cannot be an accuracy, or None."""
    if not math.isfinite(value):
        return f"not a number ({value})"
    if not 0.0 <= value <= 1.0:
        return "not an accuracy: a fraction lies in 0..1"
    return None


def as_logged(expect: Expectations, logged) -> Expectations:
    """The contract with its validation metrics named as the run's verl logs them (`logged`:
    VerlSpec.logged_metric), so every check reads and shows the name the log holds."""
    accuracy, merged = expect.accuracy, expect.merged_matches_last
    if isinstance(accuracy, AccuracyExpect) and accuracy.source == "log":
        accuracy = replace(accuracy, metric=logged(accuracy.metric))
    if merged is not None:
        merged = replace(merged, metric=logged(merged.metric))
    return replace(expect, accuracy=accuracy, merged_matches_last=merged)


def _unlogged(metric: str, run, facts: RunFacts, contract_metric: str, profile: str) -> str:
    """Why a validation metric is not in the log: another verl's name for it, or no validation at all."""
    from rlrecipes.verl.specs import SPECS

    keys = set(run.keys)
    others: dict[str, list[str]] = {}
    for version, spec in SPECS.items():
        name = spec.logged_metric(contract_metric)
        if name != metric and name in keys:
            others.setdefault(name, []).append(version)
    if others:
        name, versions = next(iter(others.items()))
        return (f"{metric} not logged; the log has {name}, as verl {', '.join(versions)} logs it: a run of another "
                f"verl than {profile}'s {facts.verl}?")
    if not any(key.startswith(("val-", "val/")) for key in keys):
        return f"{metric} not logged: the run validated nowhere (trainer.test_freq, trainer.val_before_train)"
    return f"{metric} not logged"


def _step_check(run, facts: RunFacts) -> Check:
    name, last = "training steps (the last logged step against the run's planned steps)", max(run.steps)
    if facts.planned_steps is None:
        return Check(name, "-", "-", f"step {last}", NOT_MEASURED, facts.planned_from, required=False)
    value = f"step {last} of {facts.planned_steps}"
    if last < facts.planned_steps:
        return Check(name, "-", f"step {facts.planned_steps}", value, MISSED,
                     f"stopped early: steps {last + 1}..{facts.planned_steps} not logged")
    return Check(name, "-", f"step {facts.planned_steps}", value, MET, facts.planned_from)


def _log_accuracy_checks(exp: AccuracyExpect, run, facts: RunFacts, cited: str, contract_metric: str,
                         profile: str) -> tuple[list[Check], dict[str, float]]:
    xs, ys = run.logged(exp.metric)
    start = _at_step(xs, ys, exp.before.step) if exp.before is not None else None
    checks: list[Check] = []
    values: dict[str, float] = {}
    for label, band in (("before", exp.before), ("after", exp.after)):
        if band is None:
            continue
        name = f"accuracy {label} training"
        # verl validates at step 0 only with trainer.val_before_train: where the recipe turns it off, the
        # "before" band is a figure for the reader, not something this run can show
        required = not (label == "before" and band.step in (0, "first") and not facts.validates_before)
        found = _at_step(xs, ys, band.step)
        # "after" at the very step "before" read (one validation logged) says nothing about training
        same = label == "after" and found is not None and start is not None and found[0] == start[0]
        if found is None or same:
            why = ("the recipe does not validate before training (trainer.val_before_train: false)" if not required
                   else _unlogged(exp.metric, run, facts, contract_metric, profile) if not xs
                   else f"logged at steps {xs[0]}..{xs[-1]}, not at step {band.step}" if found is None
                   else f"only one validation logged (step {found[0]})")
            checks.append(Check(name, exp.metric, _band_text(band), "-", NOT_MEASURED, why, required=required))
            continue
        step, value = found
        shown = f"{value:.4f} at step {step} ({len(xs)} validation{'s' if len(xs) != 1 else ''})"
        problem = _accuracy_problem(value)
        if problem:
            checks.append(Check(name, exp.metric, _band_text(band), shown, MISSED, problem))
            continue
        values[label] = value
        met = _in_band(value, band)
        checks.append(Check(name, exp.metric, _band_text(band), shown, MET if met else MISSED, cited if met else "",
                            measured=value))
    return checks, values


def _eval_accuracy_checks(exp: AccuracyExpect, fast: FastEvals, cited: str) -> tuple[list[Check], dict[str, float]]:
    checks: list[Check] = []
    values: dict[str, float] = {}
    for label, band, model in (("before", exp.before, EVAL_BEFORE), ("after", exp.after, EVAL_AFTER)):
        if band is None:
            continue
        name, metric = f"held-out accuracy {label} training", f"eval fast_eval.{model}.{exp.metric}"
        entry = (fast or {}).get(model)
        if entry is None:
            why = "no eval summary (--eval DIR)" if fast is None else f"the eval summary has no {model} fast eval"
            checks.append(Check(name, metric, _band_text(band), "-", NOT_MEASURED, why))
            continue
        value = entry.accuracy if exp.metric == "accuracy" else entry.flexible_accuracy
        if value is None:
            checks.append(Check(name, metric, _band_text(band), "-", NOT_MEASURED, f"{metric} not in the summary"))
            continue
        shown = f"{value:.4f} on {entry.n} problems"
        problem = _accuracy_problem(value)
        if problem:
            checks.append(Check(name, metric, _band_text(band), shown, MISSED, problem))
        else:
            values[label] = value
            met = _in_band(value, band)
            checks.append(Check(name, metric, _band_text(band), shown, MET if met else MISSED, cited if met else "",
                                measured=value))
        if exp.min_problems is not None:
            checks.append(Check("held-out problems", f"eval fast_eval.{model}.n", f">= {exp.min_problems}",
                                str(entry.n), MET if entry.n >= exp.min_problems else MISSED))
    return checks, values


def _accuracy_checks(exp: AccuracyExpect, run, fast: FastEvals, facts: RunFacts, contract_metric: str,
                     profile: str) -> list[Check]:
    cited = "; ".join(f"{key}: {r.before} -> {r.accuracy}" if r.before is not None else f"{key}: {r.accuracy}"
                      for key in exp.cites for r in [reference.ACCURACY_RECORDS[key]])
    if exp.source == "log":
        checks, values = _log_accuracy_checks(exp, run, facts, cited, contract_metric, profile)
    else:
        checks, values = _eval_accuracy_checks(exp, fast, cited)
    if exp.gain_min is not None:
        name, expected = "accuracy gain (after - before)", f">= {exp.gain_min:+.3f}"
        required = all(c.required for c in checks if c.name.endswith("training"))
        if "before" not in values or "after" not in values:
            checks.append(Check(name, exp.metric, expected, "-", NOT_MEASURED, "needs both accuracies",
                                required=required))
        else:
            gain = values["after"] - values["before"]
            checks.append(Check(name, exp.metric, expected, f"{gain:+.4f}", MET if gain >= exp.gain_min else MISSED,
                                measured=gain))
    return checks


def fitted_rise(xs: list[int], ys: list[float]) -> tuple[float, float]:
    """The least-squares slope of ys over steps xs (per step), and that slope times the steps xs spans: the rise
    a straight line through every logged step gives. Needs two distinct steps."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return slope, slope * (xs[-1] - xs[0])


def _reward_check(exp: RewardExpect, run) -> Check:
    fitted = exp.statistic == "fitted"
    k = exp.window or 0
    name = ("training reward rises (least-squares line over every logged step, slope x steps spanned)" if fitted
            else f"training reward rises (mean of last {k} - first {k} steps)")
    expected = f">= {exp.rise_min:+.3f}"
    xs, ys = run.logged(exp.metric)
    bad = _not_finite(xs, ys)
    if bad:
        return Check(name, exp.metric, expected, "-", MISSED, f"not a number at {_steps_text(bad)}")
    needs = exp.min_steps if fitted else 2 * k
    if len(xs) < needs:
        return Check(name, exp.metric, expected, "-", NOT_MEASURED, f"{len(xs)} step(s) logged it; needs {needs}")
    if fitted:
        slope, rise = fitted_rise(xs, ys)
        got = f"{rise:+.4f} ({slope:+.5f} a step over steps {xs[0]}-{xs[-1]})"
    else:
        first, last = sum(ys[:k]) / k, sum(ys[-k:]) / k
        rise = last - first
        got = f"{rise:+.4f} ({first:.4f} -> {last:.4f})"
    return Check(name, exp.metric, expected, got, MET if rise >= exp.rise_min else MISSED, measured=rise)


def training_steps(run) -> list[int]:
    """The steps that trained (timed or rewarded), not a step-0 or resume-step validation alone."""
    return [s for s, m in run.steps.items() if STEP_TIME in m or any(k.startswith("critic/score") for k in m)]


def _bound_checks(bounds: tuple[Bound, ...], run, facts: RunFacts) -> list[Check]:
    checks = []
    trained = len(training_steps(run))
    for bound in bounds:
        xs, ys = run.logged(bound.metric)
        if bound.metric.startswith("training/rollout_probs_diff"):
            kept = [(x, y) for x, y in zip(xs, ys) if run.steps[x].get(_ROLLOUT_VALID, 1) != 0]
            xs, ys = [x for x, _ in kept], [y for _, y in kept]
        for side, limit in (("min", bound.min), ("max", bound.max)):
            if limit is None:
                continue
            name = "rollout vs trainer (every step)"
            expected = f">= {limit:g}" if side == "min" else f"<= {limit:g}"
            bad = _not_finite(xs, ys)
            if bad:
                checks.append(Check(name, bound.metric, expected, "-", MISSED, f"not a number at {_steps_text(bad)}"))
                continue
            if not xs:
                why = ("the HF rollout logs no rollout log-probs to compare" if facts.hf_rollout else
                       "not logged (calculate_log_probs off, or a run of another rollout)")
                checks.append(Check(name, bound.metric, expected, "-", NOT_MEASURED, why,
                                    required=not facts.hf_rollout))
                continue
            worst = min(range(len(ys)), key=lambda i: ys[i] if side == "min" else -ys[i])
            ok = ys[worst] >= limit if side == "min" else ys[worst] <= limit
            of = f"{len(xs)} steps" if len(xs) >= trained else f"{len(xs)} of {trained} trained steps"
            checks.append(Check(name, bound.metric, expected, f"{ys[worst]:.4g} at step {xs[worst]} (worst of {of})",
                                MET if ok else MISSED, measured=ys[worst]))
    return checks


def _merged_check(exp: MergedExpect, run, fast: FastEvals, facts: RunFacts, min_problems: int | None,
                  profile: str) -> Check:
    name = "merged model scores what the last trained step scored"
    metric = f"{exp.metric} vs eval fast_eval.{EVAL_AFTER}.{exp.eval_metric}"
    expected = f"within {exp.tolerance:.3f}" + (f" on >= {min_problems} problems" if min_problems else "")
    xs, ys = run.logged(exp.metric)
    trained = (fast or {}).get(EVAL_AFTER)
    score = None if trained is None else trained.accuracy if exp.eval_metric == "accuracy" \
        else trained.flexible_accuracy
    if not xs or score is None:
        why = (_unlogged(exp.metric, run, facts, exp.metric, profile) if not xs
               else "no eval summary (--eval DIR)" if fast is None
               else f"the eval summary has no {EVAL_AFTER} fast eval" if trained is None
               else f"the eval summary has no {EVAL_AFTER} {exp.eval_metric}")
        return Check(name, metric, expected, "-", NOT_MEASURED, why)
    diff = score - ys[-1]
    value = f"{score:.4f} on {trained.n} problems vs {ys[-1]:.4f} at step {xs[-1]} ({diff:+.4f})"
    problem = _accuracy_problem(ys[-1]) or _accuracy_problem(score)
    if problem:
        return Check(name, metric, expected, value, MISSED, problem)
    if min_problems is not None and trained.n < min_problems:
        return Check(name, metric, expected, value, MISSED,
                     f"scored on {trained.n} problems; the contract needs >= {min_problems} (accuracy.min_problems)")
    return Check(name, metric, expected, value, MET if abs(diff) <= exp.tolerance else MISSED, measured=diff)


def _skipped(name: str, reason: str) -> Check:
    """A check the contract declares meaningless for this recipe (`{not_measured: why}`)."""
    return Check(name, "-", "-", "-", NOT_MEASURED, reason, required=False)


def judge(expect: Expectations, recipe: str, profile: str, run, fast: FastEvals = None, settings=None,
          eval_path: str | None = None, facts: RunFacts | None = None, strict: bool = False) -> ExpectResult:
    """Every expectation of `expect` against a run's metrics (rlrecipes.verl.run_metrics.RunMetrics), an
    optional eval summary's fast evals (rlrecipes.after.evaluate.fast_evals), `settings` (the ResolvedRun of
    recipe x profile: for figures scaled from a record measured at other settings) and what else is known
    of the run (`facts`). Pure: reads nothing, writes nothing."""
    facts = facts or RunFacts()
    contract = expect
    if settings is not None:
        expect = as_logged(expect, settings.image.spec.logged_metric)
    checks: list[Check] = [_step_check(run, facts)]
    if isinstance(expect.accuracy, NotMeasured):
        checks.append(_skipped("accuracy", expect.accuracy.reason))
    else:
        checks += _accuracy_checks(expect.accuracy, run, fast, facts, contract.accuracy.metric, profile)
    if isinstance(expect.reward, NotMeasured):
        checks.append(_skipped("training reward rises", expect.reward.reason))
    else:
        checks.append(_reward_check(expect.reward, run))
    if isinstance(expect.rollout_agreement, NotMeasured):
        checks.append(_skipped("rollout vs trainer", expect.rollout_agreement.reason))
    elif expect.rollout_agreement is not None:
        checks += _bound_checks(expect.rollout_agreement, run, facts)
    if expect.merged_matches_last is not None:
        problems = expect.accuracy.min_problems if isinstance(expect.accuracy, AccuracyExpect) else None
        checks.append(_merged_check(expect.merged_matches_last, run, fast, facts, problems, profile))
    checks += profile_checks(expect.profiles[profile], profile, run, settings, facts)
    return ExpectResult(recipe=recipe, profile=profile, checks=tuple(checks),
                        logs=tuple(str(launch.path) for launch in run.launches), eval_summary=eval_path,
                        strict=strict, gpu=facts.gpu, reference_gpus=reference_gpus(expect.profiles[profile]))


# ----------------------------------------------------------------------------------------- reading a run
def check_identity(recipe: str, run, run_dir: str | None = None) -> None:
    """RecipeError when a log is another recipe's.

    What names a run: a console log holds the config verl printed, with `trainer.experiment_name` (the
    recipe's name, `/` as `-`); a JSONL file of verl's file logger holds only steps and metrics, so for it
    only its directory can say -- the launcher writes LOG_DIR/<recipe>/. Every log is asked, each one in
    the directory it lies in (a `--log` beside a run directory too), and so is the run directory. Neither
    names the profile: that is taken on trust.
    """
    from rlrecipes.recipe.load import list_recipes
    from rlrecipes.verl.logs import experiment_names

    experiment = recipe.replace("/", "-")
    others = {Path(name).name for name in list_recipes()} - {Path(recipe).name}
    for launch in run.launches:
        folders = {launch.path.resolve().parent} | ({Path(run_dir).resolve()} if run_dir else set())
        for folder in sorted(folders):
            if folder.name in others:
                raise RecipeError(f"this log lies in the run directory of recipe {folder.name!r}, not {recipe!r}",
                                  where=str(launch.path), hint=f"pass --recipe {folder.name}, or the log of {recipe}")
        if launch.kind == "console":
            names = experiment_names(launch.path.read_text(encoding="utf-8", errors="replace"))
            if names and experiment not in names:
                raise RecipeError(f"a log of another run: its config names experiment_name "
                                  f"{', '.join(sorted(names))!r}, recipe {recipe!r} sets {experiment!r}",
                                  where=str(launch.path))


def planned_steps(run, run_dir: str | None, profile: str, settings) -> tuple[int | None, str]:
    """The run's trainer.total_training_steps: from the config the launcher rendered beside its logs
    (LOG_DIR/<recipe>/run-<profile>/config.yaml, overrides applied), else the recipe's own setting."""
    import yaml

    folder = Path(run_dir) if run_dir else run.launches[0].path.parent
    rendered = folder / f"run-{profile}" / "config.yaml"
    if rendered.is_file():
        try:
            data = yaml.safe_load(rendered.read_text(encoding="utf-8"))
            steps = data["trainer"]["total_training_steps"]
        except (yaml.YAMLError, KeyError, TypeError, ValueError):
            steps = None
        if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0:
            return steps, f"trainer.total_training_steps in {rendered.parent.name}/config.yaml"
    steps = settings.get("trainer.total_training_steps") if settings is not None else None
    if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0:
        return steps, "the recipe's trainer.total_training_steps"
    return None, (f"the planned steps are unknown: no run-{profile}/config.yaml beside the logs, and the recipe "
                  "sets no trainer.total_training_steps")


def run_gpu(gpu: str | None, profile) -> tuple[str | None, str]:
    """The GPU model the run ran on: `--gpu`, else the profile's where it names one model."""
    if gpu:
        return gpu, ""
    if not profile.gpu.name.lower().startswith("any"):
        return profile.gpu.name, ""
    return None, f"the run's GPU is unknown (profile {profile.name} is for {profile.gpu.name}; give --gpu NAME)"


def check_run(recipe_name: str, profile_name: str, run_dir: str | None = None, logs: list[str] | None = None,
              eval_dir: str | None = None, gpu: str | None = None, strict: bool = False) -> ExpectResult:
    """Load recipe, profile, logs and eval summary, check they belong together, and judge the run."""
    from rlrecipes.recipe.load import load_profile, load_recipe, resolve
    from rlrecipes.verl.run_metrics import load_run

    recipe = load_recipe(recipe_name)
    profile = load_profile(profile_name)
    if profile.name not in recipe.profiles:
        raise RecipeError(f"profile {profile.name!r} is not one this recipe runs on, so it has no contract there",
                          where=f"{recipe.path}: profiles", hint=f"its profiles: {', '.join(recipe.profiles)}")
    if not run_dir and not logs:
        raise RecipeError("no run to judge", where="arguments", hint="give RUN_DIR or --log FILE")
    run = load_run(run_dir, logs)
    if not run.steps:
        raise RecipeError("the metrics files hold no logged steps", where=run_dir or ", ".join(logs or []))
    check_identity(recipe.name, run, run_dir)
    fast = eval_file = None
    if eval_dir:
        from rlrecipes.after.evaluate import SUMMARY_FILE, fast_evals, load_summary

        eval_file = str(Path(eval_dir) / SUMMARY_FILE if Path(eval_dir).is_dir() else Path(eval_dir))
        try:
            fast = fast_evals(load_summary(eval_dir))
        except RecipeError as exc:
            raise RecipeError(exc.message, where=eval_file, hint=exc.hint) from exc
    settings = resolve(recipe.name, profile.name, env={})
    steps, steps_from = planned_steps(run, run_dir, profile.name, settings)
    gpu_name, gpu_unknown = run_gpu(gpu, profile)
    facts = RunFacts(planned_steps=steps, planned_from=steps_from, gpu=gpu_name, gpu_unknown=gpu_unknown,
                     validates_before=settings.get("trainer.val_before_train") is not False,
                     hf_rollout=profile.rollout == "hf", verl=settings.image.spec.version)
    return judge(recipe.expect, recipe.name, profile.name, run, fast, settings, eval_file, facts, strict)



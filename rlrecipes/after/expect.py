"""A run judged against its recipe's expected result (the `expect:` block, parsed by
rlrecipes.recipe.expect_schema when the recipe loads).

A check is `met`, `missed`, or `not measured` (the run's logs lack what it reads, or the recipe says the
figure means nothing there -- a random-weight smoke model's accuracy). `rlrecipes expect` exits 0 when
everything measured is met, 1 when anything is missed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path

from rlrecipes import reference
from rlrecipes.errors import EXIT_FAILED, EXIT_OK, RecipeError
from rlrecipes.recipe.expect_schema import (STEP_TIME, AccuracyExpect, Band, Bound, Expectations, Figure,
                                            MergedExpect, NotMeasured, ProfileExpect, RewardExpect)

MET, MISSED, NOT_MEASURED = "met", "missed", "not measured"
VALIDATION_TIME = "timing_s/testing"
EVAL_BEFORE, EVAL_AFTER = "baseline", "trained"  # the labels of the two models in an eval summary
# training/rollout_probs_diff_* are averages over response tokens; a batch without any logs valid=0
_ROLLOUT_VALID = "training/rollout_probs_diff_valid"


# --------------------------------------------------------------------------------------------- judgement
@dataclass(frozen=True)
class Check:
    name: str        # what is expected of the run, in words ("accuracy after training")
    metric: str      # what it reads: a logged metric, an eval summary field, or "-"
    expected: str    # the contract's figure
    value: str       # the run's figure, "-" when it has none
    status: str      # met | missed | not measured
    detail: str = ""  # why it was missed or not measured; where the figure comes from

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ExpectResult:
    recipe: str
    profile: str
    checks: tuple[Check, ...]
    logs: tuple[str, ...]
    eval_summary: str | None

    @property
    def status(self) -> str:
        return MISSED if any(c.status == MISSED for c in self.checks) else MET

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED if self.status == MISSED else EXIT_OK

    def counts(self) -> dict[str, int]:
        return {s: sum(c.status == s for c in self.checks) for s in (MET, MISSED, NOT_MEASURED)}

    def as_dict(self) -> dict:
        return {"recipe": self.recipe, "profile": self.profile, "status": self.status, "counts": self.counts(),
                "checks": [c.as_dict() for c in self.checks], "logs": list(self.logs),
                "eval_summary": self.eval_summary}


def _band_text(band: Band) -> str:
    if band.min is not None and band.max is not None:
        text = f"{band.min:.3f} .. {band.max:.3f}"
    elif band.min is not None:
        text = f">= {band.min:.3f}"
    else:
        text = f"<= {band.max:.3f}"
    return text + (f" at step {band.step}" if band.step != "" else "")


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


def as_logged(expect: Expectations, logged) -> Expectations:
    """The contract with its validation metrics named as the run's verl logs them (`logged`:
    VerlSpec.logged_metric), so every check reads and shows the name the log holds."""
    accuracy, merged = expect.accuracy, expect.merged_matches_last
    if isinstance(accuracy, AccuracyExpect) and accuracy.source == "log":
        accuracy = replace(accuracy, metric=logged(accuracy.metric))
    if merged is not None:
        merged = replace(merged, metric=logged(merged.metric))
    return replace(expect, accuracy=accuracy, merged_matches_last=merged)


def _accuracy_checks(exp: AccuracyExpect, run, summary: dict | None) -> list[Check]:
    cited = "; ".join(f"{key}: {r.before} -> {r.accuracy}" if r.before is not None else f"{key}: {r.accuracy}"
                      for key in exp.cites for r in [reference.ACCURACY_RECORDS[key]])
    checks: list[Check] = []
    values: dict[str, float | None] = {"before": None, "after": None}
    if exp.source == "log":
        xs, ys = run.series(exp.metric)
        start = _at_step(xs, ys, exp.before.step) if exp.before is not None else None
        for label, band in (("before", exp.before), ("after", exp.after)):
            if band is None:
                continue
            name, metric = f"accuracy {label} training", exp.metric
            found = _at_step(xs, ys, band.step)
            # "after" at the very step "before" read (one validation logged) says nothing about training
            same = label == "after" and found is not None and start is not None and found[0] == start[0]
            if found is None or same:
                why = (f"{exp.metric} not logged" if not xs else
                       f"logged at steps {xs[0]}..{xs[-1]}, not at step {band.step}" if found is None else
                       f"only one validation logged (step {found[0]})")
                checks.append(Check(name, metric, _band_text(band), "-", NOT_MEASURED, why))
                continue
            step, value = found
            values[label] = value
            checks.append(Check(name, metric, _band_text(band), f"{value:.4f} at step {step}",
                                MET if _in_band(value, band) else MISSED, cited))
    else:
        fast = (summary or {}).get("fast_eval", {})
        for label, band, model in (("before", exp.before, EVAL_BEFORE), ("after", exp.after, EVAL_AFTER)):
            if band is None:
                continue
            name, metric = f"held-out accuracy {label} training", f"eval fast_eval.{model}.{exp.metric}"
            entry = fast.get(model)
            if summary is None or not isinstance(entry, dict) or not isinstance(entry.get(exp.metric), (int, float)):
                why = ("no eval summary (--eval DIR)" if summary is None
                       else f"the eval summary has no {model} fast eval")
                checks.append(Check(name, metric, _band_text(band), "-", NOT_MEASURED, why))
                continue
            value = float(entry[exp.metric])
            values[label] = value
            checks.append(Check(name, metric, _band_text(band), f"{value:.4f} on {entry.get('n', '?')} problems",
                                MET if _in_band(value, band) else MISSED, cited))
            if exp.min_problems is not None:
                n = entry.get("n")
                ok = isinstance(n, int) and n >= exp.min_problems
                checks.append(Check("held-out problems", f"eval fast_eval.{model}.n", f">= {exp.min_problems}",
                                    "-" if n is None else str(n), MET if ok else MISSED))
    if exp.gain_min is not None:
        name, expected = "accuracy gain (after - before)", f">= {exp.gain_min:+.3f}"
        if values["before"] is None or values["after"] is None:
            checks.append(Check(name, exp.metric, expected, "-", NOT_MEASURED, "needs both accuracies"))
        else:
            gain = values["after"] - values["before"]
            checks.append(Check(name, exp.metric, expected, f"{gain:+.4f}",
                                MET if gain >= exp.gain_min else MISSED))
    return checks


def _reward_check(exp: RewardExpect, run) -> Check:
    k = exp.window
    name = f"training reward rises (mean of last {k} - first {k} steps)"
    expected = f">= {exp.rise_min:+.3f}"
    xs, ys = run.series(exp.metric)
    if len(xs) < 2 * k:
        return Check(name, exp.metric, expected, "-", NOT_MEASURED, f"{len(xs)} step(s) logged it; needs {2 * k}")
    first, last = sum(ys[:k]) / k, sum(ys[-k:]) / k
    rise = last - first
    return Check(name, exp.metric, expected, f"{rise:+.4f} ({first:.4f} -> {last:.4f})",
                 MET if rise >= exp.rise_min else MISSED)


def _bound_checks(bounds: tuple[Bound, ...], run) -> list[Check]:
    checks = []
    for bound in bounds:
        xs, ys = run.series(bound.metric)
        if bound.metric.startswith("training/rollout_probs_diff"):
            kept = [(x, y) for x, y in zip(xs, ys) if run.steps[x].get(_ROLLOUT_VALID, 1) != 0]
            xs, ys = [x for x, _ in kept], [y for _, y in kept]
        for side, limit in (("min", bound.min), ("max", bound.max)):
            if limit is None:
                continue
            name = "rollout vs trainer (every step)"
            expected = f">= {limit:g}" if side == "min" else f"<= {limit:g}"
            if not xs:
                checks.append(Check(name, bound.metric, expected, "-", NOT_MEASURED,
                                    "not logged (an HF rollout, or calculate_log_probs off)"))
                continue
            worst = min(range(len(ys)), key=lambda i: ys[i] if side == "min" else -ys[i])
            ok = ys[worst] >= limit if side == "min" else ys[worst] <= limit
            checks.append(Check(name, bound.metric, expected,
                                f"{ys[worst]:.4g} at step {xs[worst]} (worst of {len(xs)})",
                                MET if ok else MISSED))
    return checks


def _merged_check(exp: MergedExpect, run, summary: dict | None) -> Check:
    name = "merged model scores what the last trained step scored"
    metric = f"{exp.metric} vs eval fast_eval.{EVAL_AFTER}.{exp.eval_metric}"
    expected = f"within {exp.tolerance:.3f}"
    xs, ys = run.series(exp.metric)
    trained = ((summary or {}).get("fast_eval") or {}).get(EVAL_AFTER)
    score = trained.get(exp.eval_metric) if isinstance(trained, dict) else None
    if not xs or not isinstance(score, (int, float)):
        why = (f"{exp.metric} not logged" if not xs else "no eval summary (--eval DIR)" if summary is None
               else f"the eval summary has no {EVAL_AFTER} {exp.eval_metric}")
        return Check(name, metric, expected, "-", NOT_MEASURED, why)
    diff = float(score) - ys[-1]
    return Check(name, metric, expected, f"{float(score):.4f} vs {ys[-1]:.4f} at step {xs[-1]} ({diff:+.4f})",
                 MET if abs(diff) <= exp.tolerance else MISSED)


def steady_step_times(run) -> tuple[list[int], list[float]]:
    """timing_s/step of the training steps in steady state: without the first timed step of each launch
    (start-up: vLLM's graph capture, caches warming) and without the steps that also ran validation (verl
    times its validation inside the step, `timing_s/testing`: its cost follows test_freq and the test set,
    not the training)."""
    firsts = set()
    for launch in run.launches:
        timed = sorted(s for s, m in launch.steps.items() if STEP_TIME in m)
        if timed:
            firsts.add(timed[0])
    xs, ys = run.series(STEP_TIME)
    kept = [(x, y) for x, y in zip(xs, ys) if x not in firsts and VALIDATION_TIME not in run.steps[x]]
    return [x for x, _ in kept], [y for _, y in kept]


def _figure_value(figure: Figure, settings) -> tuple[float | None, str]:
    """(the contract's figure for this run, how it was obtained), or (None, why it does not apply)."""
    if figure.ref is None:
        return figure.value, figure.source
    found = reference.record(figure.ref)
    if settings is None:
        return None, "the run's settings are unknown"
    if not reference.applies_to(found, settings.get):
        wanted = ", ".join(f"{k}={v}" for k, v in found.config)
        return None, f"record {figure.ref} was measured with {wanted}; this recipe on this profile differs"
    if figure.value is not None:
        return figure.value, f"{figure.ref} ({found.source})"
    responses = int(settings.get("data.train_batch_size")) * int(settings.get("actor_rollout_ref.rollout.n") or 1)
    length = int(settings.get("data.max_response_length"))
    scaled = reference.step_seconds_at(found, responses, length)
    how = f"{figure.ref} ({found.source})"
    if (responses, length) != (found.responses_per_step, found.max_response_length):
        how += (f", {found.value:g} s at {found.responses_per_step} x {found.max_response_length} tokens scaled to "
                f"{responses} x {length}")
    return scaled, how


def _profile_checks(entry: ProfileExpect | NotMeasured, profile: str, run, settings) -> list[Check]:
    names = (f"s/step on {profile} (steady state: no launch's first step, no validation step)",
             f"peak memory on {profile} (max over steps)")
    if isinstance(entry, NotMeasured):
        return [Check(name, "-", "-", "-", NOT_MEASURED, entry.reason) for name in names]
    checks = []
    for name, figure, unit in ((names[0], entry.seconds_per_step, "s"), (names[1], entry.peak_memory_gib, "GiB")):
        if isinstance(figure, NotMeasured):
            checks.append(Check(name, "-", "-", "-", NOT_MEASURED, figure.reason))
            continue
        metric = figure.metric
        value, how = _figure_value(figure, settings)
        if value is None:
            checks.append(Check(name, metric, "-", "-", NOT_MEASURED, how))
            continue
        limit = value * (1 + figure.tolerance)
        expected = f"<= {limit:.2f} {unit} ({value:.2f} +{figure.tolerance:.0%})"
        if unit == "s":
            xs, ys = steady_step_times(run)
            if not ys:
                checks.append(Check(name, metric, expected, "-", NOT_MEASURED,
                                    f"no steady-state step logged; from {how}"))
                continue
            mean = sum(ys) / len(ys)
            checks.append(Check(name, metric, expected, f"{mean:.2f} s (mean of {len(ys)} step(s))",
                                MET if mean <= limit else MISSED, f"from {how}"))
        else:
            xs, ys = run.series(figure.metric)
            if not ys:
                checks.append(Check(name, metric, expected, "-", NOT_MEASURED, f"not logged; from {how}"))
                continue
            peak = max(range(len(ys)), key=lambda i: ys[i])
            checks.append(Check(name, metric, expected, f"{ys[peak]:.2f} GiB at step {xs[peak]}",
                                MET if ys[peak] <= limit else MISSED, f"from {how}"))
    return checks


def judge(expect: Expectations, recipe: str, profile: str, run, summary: dict | None = None, settings=None,
          eval_path: str | None = None) -> ExpectResult:
    """Every expectation of `expect` against a run's metrics (rlrecipes.verl.run_metrics.RunMetrics), an
    optional eval summary, and `settings` (the ResolvedRun of recipe x profile: for figures scaled from a
    record measured at other settings). Pure: reads nothing, writes nothing."""
    checks: list[Check] = []
    if settings is not None:
        expect = as_logged(expect, settings.image.spec.logged_metric)
    if isinstance(expect.accuracy, NotMeasured):
        checks.append(Check("accuracy", "-", "-", "-", NOT_MEASURED, expect.accuracy.reason))
    else:
        checks += _accuracy_checks(expect.accuracy, run, summary)
    if isinstance(expect.reward, NotMeasured):
        checks.append(Check("training reward rises", "-", "-", "-", NOT_MEASURED, expect.reward.reason))
    else:
        checks.append(_reward_check(expect.reward, run))
    if isinstance(expect.rollout_agreement, NotMeasured):
        checks.append(Check("rollout vs trainer", "-", "-", "-", NOT_MEASURED, expect.rollout_agreement.reason))
    elif expect.rollout_agreement is not None:
        checks += _bound_checks(expect.rollout_agreement, run)
    if expect.merged_matches_last is not None:
        checks.append(_merged_check(expect.merged_matches_last, run, summary))
    checks += _profile_checks(expect.profiles[profile], profile, run, settings)
    return ExpectResult(recipe=recipe, profile=profile, checks=tuple(checks),
                        logs=tuple(str(launch.path) for launch in run.launches), eval_summary=eval_path)


# ----------------------------------------------------------------------------------------- reading a run
def check_identity(recipe: str, run, run_dir: str | None = None) -> None:
    """RecipeError when a log is another recipe's.

    What names a run: a console log holds the config verl printed, with `trainer.experiment_name` (the
    recipe's name, `/` as `-`); a JSONL file of verl's file logger holds only steps and metrics, so for it
    only its directory can say -- the launcher writes LOG_DIR/<recipe>/. Neither names the profile: that
    is taken on trust.
    """
    from rlrecipes.recipe.load import list_recipes
    from rlrecipes.verl.logs import experiment_names

    experiment = recipe.replace("/", "-")
    others = {Path(name).name for name in list_recipes()} - {Path(recipe).name}
    for launch in run.launches:
        folder = Path(run_dir).resolve() if run_dir else launch.path.resolve().parent
        if folder.name in others:
            raise RecipeError(f"this log lies in the run directory of recipe {folder.name!r}, not {recipe!r}",
                              where=str(launch.path), hint=f"pass --recipe {folder.name}, or the log of {recipe}")
        if launch.kind == "console":
            names = experiment_names(launch.path.read_text(encoding="utf-8", errors="replace"))
            if names and experiment not in names:
                raise RecipeError(f"a log of another run: its config names experiment_name "
                                  f"{', '.join(sorted(names))!r}, recipe {recipe!r} sets {experiment!r}",
                                  where=str(launch.path))


def check_run(recipe_name: str, profile_name: str, run_dir: str | None = None, logs: list[str] | None = None,
              eval_dir: str | None = None) -> ExpectResult:
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
    summary = eval_file = None
    if eval_dir:
        from rlrecipes.after.evaluate import SUMMARY_FILE, load_summary

        summary = load_summary(eval_dir)
        if not isinstance(summary, dict):
            raise RecipeError("an eval summary is a JSON object", where=eval_dir)
        eval_file = str(Path(eval_dir) / SUMMARY_FILE if Path(eval_dir).is_dir() else Path(eval_dir))
    settings = resolve(recipe.name, profile.name, env={})
    return judge(recipe.expect, recipe.name, profile.name, run, summary, settings, eval_file)


# ---------------------------------------------------------------------------------------------- showing
STATUS_STYLE = {MET: "green", MISSED: "bold red", NOT_MEASURED: "yellow"}


def table_rows(result: ExpectResult) -> list[list[str]]:
    return [[c.name, c.metric, c.expected, c.value, c.status, c.detail] for c in result.checks]


TABLE_HEADER = ["expectation", "reads", "contract", "this run", "result", "note"]


def verdict_line(result: ExpectResult) -> str:
    counts = result.counts()
    return (f"{result.recipe} on {result.profile}: {result.status.upper()} ({counts[MET]} met, {counts[MISSED]} "
            f"missed, {counts[NOT_MEASURED]} not measured)")


def print_table(result) -> None:
    try:
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table
    except ImportError:  # the verl venvs have no rich
        for row in table_rows(result):
            print(" | ".join(row))
        print(verdict_line(result))
        return
    table = Table(title=f"Expected result: {result.recipe} on {result.profile}")
    for name in TABLE_HEADER:
        table.add_column(name, overflow="fold")
    for row in table_rows(result):
        status = row[4]
        table.add_row(*map(escape, row[:4]), f"[{STATUS_STYLE[status]}]{status}[/]", escape(row[5]))
    console = Console()
    console.print(table)
    console.print(escape(verdict_line(result)))

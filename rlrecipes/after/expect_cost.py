"""The cost of a run beside its outcome: s/step, peak memory and start-up against the contract's reference, which
was measured on one GPU model and is compared only with a run on that model (rlrecipes.after.verdict: shown,
counted in the verdict only under `--strict`). The start-up is the run's first launch's, from its start to verl's
"ready to fit" (rlrecipes/verl/startup.py); a run whose console logs mark no start-up has no such line unless the
contract names a reference."""

from __future__ import annotations

import math
import re

from rlrecipes import reference
from rlrecipes.reference import same_gpu
from rlrecipes.after.verdict import COST, MET, MISSED, NOT_MEASURED, Check, RunFacts
from rlrecipes.recipe.expect_schema import STARTUP, Figure, NotMeasured, ProfileExpect
from rlrecipes.verl.run_metrics import steady_step_mean, steady_step_times
from rlrecipes.verl.startup import Startup, run_startups


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


def _measured_cost(kind: str, figure: Figure, run, startups: list[Startup]) -> tuple[float, str, str] | str:
    """(the run's figure, its text, the unit) or why it has none."""
    if kind == "startup":
        return _measured_startup(startups)
    if kind == "seconds":
        steady = steady_step_mean(run)
        if steady is None:
            return "no steady-state step logged"
        mean, steps = steady
        return mean, f"{mean:.2f} s ({steps} steps)", "s"
    xs, ys = run.series(figure.metric)
    if not ys:
        return f"{figure.metric} not logged"
    peak = max(range(len(ys)), key=lambda i: ys[i])
    return ys[peak], f"{ys[peak]:.2f} GiB (step {xs[peak]})", "GiB"


def _measured_startup(startups: list[Startup]) -> tuple[float, str, str] | str:
    """The first launch's start-up (seconds, its text, the unit), or why the logs show none."""
    if not startups:
        return "no console log marks it"
    return startups[0].total_s, f"{startups[0].total_s:.0f} s", "s"


def _startup_note(startups: list[Startup]) -> str:
    later = ", ".join(f"{s.total_s:.0f} s" for s in startups[1:])
    return f"{startups[0].log.name}" + (f"; the later launches {later}" if later else "") if startups else ""


def _cost_check(name: str, kind: str, figure: Figure, run, settings, facts: RunFacts,
                startups: list[Startup]) -> Check:
    value, how = _figure_value(figure, settings)
    if value is None:
        return Check(name, figure.metric, "-", "-", NOT_MEASURED, how, part=COST, required=False)
    limit = value * (1 + figure.tolerance)
    unit = "GiB" if kind == "memory" else "s"
    expected = f"<= {limit:.2f} {unit} ({value:.2f} +{figure.tolerance:.0%})"
    measured = _measured_cost(kind, figure, run, startups)
    if isinstance(measured, str):
        return Check(name, figure.metric, expected, "-", NOT_MEASURED, f"{measured}; from {how}", part=COST,
                     required=False)
    number, text, unit = measured
    reference_text = f"the reference {value:.2f} {unit} was measured on {figure.gpu}"
    if facts.gpu is None or not same_gpu(facts.gpu, figure.gpu):
        why = (f"{facts.gpu_unknown}; {reference_text}" if facts.gpu is None
               else f"the run's GPU is {facts.gpu}, {reference_text}")
        return Check(name, figure.metric, expected, text, NOT_MEASURED, f"not compared: {why}", part=COST,
                     required=False)
    if not math.isfinite(number):
        return Check(name, figure.metric, expected, text, MISSED, "not a number", part=COST, required=False)
    shown = f"{text}, {number / value:.2f}x the reference {value:.2f} {unit} on {figure.gpu}"
    detail = f"from {how}" + (f"; {_startup_note(startups)}" if kind == "startup" else "")
    return Check(name, figure.metric, expected, shown, MET if number <= limit else MISSED, detail, part=COST,
                 required=False)


def reference_gpus(entry: ProfileExpect | NotMeasured) -> tuple[str, ...]:
    """The GPU models the profile's cost figures were measured on (none when the profile has no figures)."""
    if isinstance(entry, NotMeasured):
        return ()
    figures = (entry.seconds_per_step, entry.peak_memory_gib, entry.startup_seconds)
    return tuple(sorted({figure.gpu for figure in figures if isinstance(figure, Figure)}))


def profile_checks(entry: ProfileExpect | NotMeasured, profile: str, run, settings, facts: RunFacts) -> list[Check]:
    names = (f"s/step on {profile} (steady state: no launch's first step, no validation step)",
             f"peak memory on {profile} (max over steps)",
             f"start-up on {profile} (the first launch to verl's 'ready to fit')")
    if isinstance(entry, NotMeasured):
        return [Check(name, "-", "-", "-", NOT_MEASURED, entry.reason, part=COST, required=False)
                for name in names[:2]]
    # each launch's start-up to "ready to fit", read from its console log once
    startups = [s for s in run_startups([launch.path for launch in run.launches]) if s.complete]
    checks = []
    for name, figure, kind in ((names[0], entry.seconds_per_step, "seconds"),
                               (names[1], entry.peak_memory_gib, "memory"),
                               (names[2], entry.startup_seconds, "startup")):
        if figure is None:  # no start-up reference: the run's own is shown when its logs mark one
            if startups:
                checks.append(Check(name, STARTUP, "-", _measured_startup(startups)[1], NOT_MEASURED,
                                    "not compared: the contract names no start-up reference; "
                                    f"{_startup_note(startups)}", part=COST, required=False))
        elif isinstance(figure, NotMeasured):
            checks.append(Check(name, "-", "-", "-", NOT_MEASURED, figure.reason, part=COST, required=False))
        else:
            checks.append(_cost_check(name, kind, figure, run, settings, facts, startups))
    return checks

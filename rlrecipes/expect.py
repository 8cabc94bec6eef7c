"""A recipe's expected result (its `expect:` block) and the judgement of a run against it.

The contract is data, like NeMo-RL's `tests/check_metrics.py` thresholds: bands and bounds on metrics
verl logs, no code per recipe. A check is `met`, `missed`, or `not measured` (the run's logs lack what it
reads, or the recipe says the figure means nothing there -- a random-weight smoke model's accuracy).
`rlrecipes expect` exits 0 when everything measured is met, 1 when anything is missed. The schema is
docs/expect.md; each block is parsed strictly when the recipe loads (rlrecipes.recipe.load_recipe).

Outside figures stay in rlrecipes.reference: a block points at a record there (`ref:`, `cites:`) rather
than repeating its number, or names the measured record under docs/bench/ that a figure comes from.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rlrecipes import reference, rollout_sync
from rlrecipes.errors import EXIT_FAILED, EXIT_OK, RecipeError
from rlrecipes.paths import repo_root
from rlrecipes.recipe import _strict, _typed
from rlrecipes.verl.logs import REWARD_KEYS

MET, MISSED, NOT_MEASURED = "met", "missed", "not measured"
STEP_TIME = "timing_s/step"
VALIDATION_TIME = "timing_s/testing"
# what `rlrecipes eval --fast-data` writes per model (evaluate.fast_eval)
EVAL_METRICS = ("accuracy", "flexible_accuracy")
EVAL_BEFORE, EVAL_AFTER = "baseline", "trained"  # the labels of the two models in an eval summary
# training/rollout_probs_diff_* are averages over response tokens; a batch without any logs valid=0
_ROLLOUT_VALID = "training/rollout_probs_diff_valid"
# A misspelled metric would read as "not measured" and pass, so a contract names only metrics verl logs:
VALIDATION_PREFIXES = ("val-core/", "val-aux/", "val/")  # verl's validation metrics (0.5.0: val/test_score/)
MEMORY_METRICS = tuple(f"{actor}perf/max_memory_{kind}_gb" for actor in ("", "actor/")  # 0.5.0: no actor/
                       for kind in ("allocated", "reserved"))
ROLLOUT_CORR_PREFIX = "rollout_corr/"  # verl >= 0.9's rollout-correction metrics (docs/bench/gpu-hopper.md)


# ------------------------------------------------------------------------------------------ the contract
@dataclass(frozen=True)
class NotMeasured:
    reason: str  # why this figure is not checked for this recipe (or profile)


@dataclass(frozen=True)
class Band:
    step: int | str  # a step number, "first" or "last" (of the logged validations); "" for an eval summary
    min: float | None
    max: float | None


@dataclass(frozen=True)
class AccuracyExpect:
    source: str                # "log": verl's validation metric in the training log; "eval": an eval summary
    metric: str
    before: Band | None
    after: Band
    gain_min: float | None     # after - before, absolute
    min_problems: int | None   # eval: each model scored on this many; log: the recipe's test split this big
    cites: tuple[str, ...]     # rlrecipes.reference.ACCURACY_RECORDS the bands are built around


@dataclass(frozen=True)
class RewardExpect:
    metric: str
    window: int                # K: the mean of the first K logged steps vs the mean of the last K
    rise_min: float


@dataclass(frozen=True)
class Bound:
    metric: str
    min: float | None          # every logged step at least this
    max: float | None          # every logged step at most this


@dataclass(frozen=True)
class MergedExpect:
    metric: str                # the training log's validation metric at its last logged step ...
    eval_metric: str           # ... against the merged (trained) model's score in the eval summary
    tolerance: float           # absolute


@dataclass(frozen=True)
class Figure:
    metric: str
    value: float | None        # None: from `ref`, at the run's settings
    tolerance: float           # relative: missed above value * (1 + tolerance)
    source: str                # the measured record: a path under docs/bench/ or a rlrecipes.reference key
    ref: str | None


@dataclass(frozen=True)
class ProfileExpect:
    seconds_per_step: Figure | NotMeasured
    peak_memory_gib: Figure | NotMeasured


@dataclass(frozen=True)
class Expectations:
    accuracy: AccuracyExpect | NotMeasured
    reward: RewardExpect | NotMeasured
    rollout_agreement: tuple[Bound, ...] | NotMeasured | None  # None: not part of this contract
    merged_matches_last: MergedExpect | None
    profiles: dict[str, ProfileExpect | NotMeasured]


def _number(value: Any, where: str) -> float:
    number = float(_typed(value, (int, float), where))
    if not math.isfinite(number):
        raise RecipeError(f"expected a finite number, got {value!r}", where=where)
    return number


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise RecipeError(f"expected a non-empty string, got {value!r}", where=where)
    return value.strip()


def _metric(value: Any, where: str, known: tuple[str, ...] = (), prefixes: tuple[str, ...] = ()) -> str:
    """A metric name verl logs: one of `known`, or under one of `prefixes`."""
    name = _text(value, where)
    if name in known or any(name.startswith(prefix) and name != prefix for prefix in prefixes):
        return name
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
    hint = (f"did you mean {', '.join(close)}?" if close else
            "known: " + ", ".join([*known, *(f"{prefix}..." for prefix in prefixes)]))
    raise RecipeError(f"{name!r} is not a metric verl logs here", where=where, hint=hint)


def _not_measured(data: Any, where: str) -> NotMeasured | None:
    """`{not_measured: "why"}`: the figure is deliberately not checked, and the contract says why."""
    if isinstance(data, dict) and "not_measured" in data:
        _strict(data, {"not_measured": True}, where)
        return NotMeasured(_text(data["not_measured"], f"{where}.not_measured"))
    return None


def _band(data: Any, where: str, source: str) -> Band:
    _strict(data, {"step": source == "log", "min": False, "max": False}, where)
    if "min" not in data and "max" not in data:
        raise RecipeError("a band needs min, max or both", where=where)
    low = _number(data["min"], f"{where}.min") if "min" in data else None
    high = _number(data["max"], f"{where}.max") if "max" in data else None
    for bound, key in ((low, "min"), (high, "max")):
        if bound is not None and not 0.0 <= bound <= 1.0:
            raise RecipeError(f"an accuracy is a fraction in 0..1, got {bound}", where=f"{where}.{key}")
    if low is not None and high is not None and low > high:
        raise RecipeError(f"min {low} is above max {high}", where=where)
    step: int | str = ""
    if source == "log":
        step = data["step"]
        if isinstance(step, bool) or not (isinstance(step, int) and step >= 0 or step in ("first", "last")):
            raise RecipeError(f"expected a step number >= 0, 'first' or 'last', got {step!r}", where=f"{where}.step")
    return Band(step=step, min=low, max=high)


def _accuracy(data: Any, where: str, test_rows: int | None) -> AccuracyExpect | NotMeasured:
    skipped = _not_measured(data, where)
    if skipped:
        return skipped
    _strict(data, {"source": True, "metric": True, "before": False, "after": False, "gain_min": False,
                   "min_problems": False, "cites": False}, where)
    source = data["source"]
    if source not in ("log", "eval"):
        raise RecipeError(f"{source!r} is not one of log, eval", where=f"{where}.source",
                          hint="log: verl's validation metric in the training log; eval: `rlrecipes eval`'s "
                               "summary (--eval DIR)")
    if source == "eval" and data["metric"] not in EVAL_METRICS:
        raise RecipeError(f"{data['metric']!r} is not one of {', '.join(EVAL_METRICS)} (what an eval summary holds)",
                          where=f"{where}.metric")
    metric = (data["metric"] if source == "eval" else
              _metric(data["metric"], f"{where}.metric", prefixes=VALIDATION_PREFIXES))
    before = _band(data["before"], f"{where}.before", source) if "before" in data else None
    after = _band(data["after"], f"{where}.after", source) if "after" in data else None
    gain = _number(data["gain_min"], f"{where}.gain_min") if "gain_min" in data else None
    if after is None:
        raise RecipeError("missing required key 'after' (the accuracy a trained run must reach)", where=where)
    # A contract that a run whose accuracy never moved would meet proves nothing.
    separated = before is not None and before.max is not None and after.min is not None and after.min > before.max
    if not separated and not (gain is not None and gain > 0 and before is not None):
        raise RecipeError("a run whose accuracy stays where it started would meet this contract",
                          where=where, hint="give after.min above before.max, or before plus gain_min > 0")
    problems = None
    if "min_problems" in data:
        problems = _typed(data["min_problems"], int, f"{where}.min_problems")
        # verl's log does not count the problems it validated on: for source log, the recipe's test split
        # must hold enough (checked here, once); an eval summary counts its own (checked per run)
        if source == "log" and (test_rows is None or test_rows < problems):
            rows = "an unknown number of" if test_rows is None else str(test_rows)
            raise RecipeError(f"the recipe's test split has {rows} rows, fewer than min_problems {problems}",
                              where=f"{where}.min_problems",
                              hint="set dataset.test_rows, or judge an eval summary (source: eval)")
    cites = tuple(_typed(data.get("cites") or [], list, f"{where}.cites"))
    for index, key in enumerate(cites):
        if not isinstance(reference.record(str(key)), reference.ReferenceAccuracy):
            raise RecipeError(f"no accuracy record named {key!r} in rlrecipes/reference.py",
                              where=f"{where}.cites[{index}]",
                              hint=f"known: {', '.join(reference.ACCURACY_RECORDS)}")
    return AccuracyExpect(source=source, metric=metric, before=before, after=after, gain_min=gain,
                          min_problems=problems, cites=tuple(map(str, cites)))


def _reward(data: Any, where: str) -> RewardExpect | NotMeasured:
    skipped = _not_measured(data, where)
    if skipped:
        return skipped
    _strict(data, {"metric": True, "window": True, "rise_min": True}, where)
    window = _typed(data["window"], int, f"{where}.window")
    if window < 1:
        raise RecipeError(f"window must be >= 1, got {window}", where=f"{where}.window")
    return RewardExpect(metric=_metric(data["metric"], f"{where}.metric", REWARD_KEYS), window=window,
                        rise_min=_number(data["rise_min"], f"{where}.rise_min"))


def _agreement(data: Any, where: str) -> tuple[Bound, ...] | NotMeasured:
    skipped = _not_measured(data, where)
    if skipped:
        return skipped
    _typed(data, dict, where)
    if not data:
        raise RecipeError("expected at least one metric with its bound", where=where)
    bounds = []
    for metric, bound in data.items():
        at = f"{where}.{metric}"
        if metric not in rollout_sync.METRICS and not str(metric).startswith(ROLLOUT_CORR_PREFIX):
            close = difflib.get_close_matches(str(metric), list(rollout_sync.METRICS), n=3, cutoff=0.6)
            raise RecipeError(f"unknown key '{metric}': not a rollout-vs-trainer metric verl logs", where=at,
                              hint=f"did you mean {', '.join(close)}?" if close else
                              f"known: {', '.join(rollout_sync.METRICS)}, {ROLLOUT_CORR_PREFIX}...")
        _strict(bound, {"min": False, "max": False}, at)
        if not bound:
            raise RecipeError("a bound needs min, max or both", where=at)
        bounds.append(Bound(metric=str(metric), min=_number(bound["min"], f"{at}.min") if "min" in bound else None,
                            max=_number(bound["max"], f"{at}.max") if "max" in bound else None))
    return tuple(bounds)


def _merged(data: Any, where: str) -> MergedExpect:
    _strict(data, {"metric": True, "eval_metric": False, "tolerance": True}, where)
    eval_metric = data.get("eval_metric", "accuracy")
    if eval_metric not in EVAL_METRICS:
        raise RecipeError(f"{eval_metric!r} is not one of {', '.join(EVAL_METRICS)}", where=f"{where}.eval_metric")
    tolerance = _number(data["tolerance"], f"{where}.tolerance")
    if tolerance < 0:
        raise RecipeError(f"tolerance must be >= 0, got {tolerance}", where=f"{where}.tolerance")
    return MergedExpect(metric=_metric(data["metric"], f"{where}.metric", prefixes=VALIDATION_PREFIXES),
                        eval_metric=eval_metric, tolerance=tolerance)


def _check_source(source: str, where: str) -> str:
    path = source.split("#", 1)[0]
    if not path.startswith("docs/bench/"):
        raise RecipeError(f"a measured record is a path under docs/bench/, got {source!r}", where=where,
                          hint="or point at a record of rlrecipes/reference.py with ref:")
    # The images ship recipes/ but not docs/: the record is checked where it can be, in a checkout (CI).
    root = repo_root()
    if (root / "docs" / "bench").is_dir() and not (root / path).exists():
        raise RecipeError(f"no measured record {path}", where=where)
    return source


def _figure(data: Any, where: str, kind: str) -> Figure | NotMeasured:
    skipped = _not_measured(data, where)
    if skipped:
        return skipped
    _strict(data, {"value": False, "ref": False, "source": False, "tolerance": True, "metric": kind == "memory"},
            where)
    tolerance = _number(data["tolerance"], f"{where}.tolerance")
    if tolerance < 0:
        raise RecipeError(f"tolerance must be >= 0, got {tolerance}", where=f"{where}.tolerance")
    metric = _metric(data["metric"], f"{where}.metric", MEMORY_METRICS) if kind == "memory" else STEP_TIME
    if ("value" in data) == ("ref" in data):
        raise RecipeError("give value (with source) or ref, one of the two", where=where)
    if "ref" in data:
        key = _text(data["ref"], f"{where}.ref")
        if "source" in data:
            raise RecipeError("a ref's source is its record's; drop source", where=f"{where}.source")
        found = reference.record(key)
        if kind == "seconds":
            if not (isinstance(found, reference.Throughput) and found.kind == "step_seconds"):
                keys = [t.key for t in reference.THROUGHPUTS if t.kind == "step_seconds"]
                raise RecipeError(f"no whole-step time named {key!r} in rlrecipes/reference.py", where=f"{where}.ref",
                                  hint=f"known: {', '.join(keys)}")
            return Figure(metric=metric, value=None, tolerance=tolerance, source=found.source, ref=key)
        if not isinstance(found, reference.MeasuredMemory):
            raise RecipeError(f"no memory measurement named {key!r} in rlrecipes/reference.py", where=f"{where}.ref",
                              hint=f"known: {', '.join(m.key for m in reference.MEASURED_MEMORY)}")
        return Figure(metric=metric, value=_memory_phase(found, metric, f"{where}.ref"), tolerance=tolerance,
                      source=found.source, ref=key)
    value = _number(data["value"], f"{where}.value")
    if value <= 0:
        raise RecipeError(f"expected a positive figure, got {value}", where=f"{where}.value")
    if "source" not in data:
        raise RecipeError("missing required key 'source' (the measured record the figure comes from)", where=where)
    return Figure(metric=metric, value=value, tolerance=tolerance,
                  source=_check_source(_text(data["source"], f"{where}.source"), f"{where}.source"), ref=None)


def _memory_phase(record: reference.MeasuredMemory, metric: str, where: str) -> float:
    """The measured phase that is what `metric` logs: reference.MEASURED_MEMORY's phases name the metric they
    were read from in parentheses ("actor update, trainer allocator peak (actor/perf/max_memory_allocated_gb)")."""
    for what, measured, _estimate, _phase in record.phases:
        if f"({metric})" in what or f"'s {metric})" in what:
            return measured
    raise RecipeError(f"record {record.key!r} has no phase measured as {metric}", where=where,
                      hint="its phases: " + "; ".join(p[0] for p in record.phases))


def parse_expect(data: Any, where: str, profiles: tuple[str, ...], test_rows: int | None = None) -> Expectations:
    """The `expect:` block of a recipe whose profiles are `profiles` (and whose test split has `test_rows`
    rows); RecipeError naming the key when malformed."""
    if data is None:
        raise RecipeError("the expect: block is empty", where=where, hint="see docs/expect.md")
    _strict(data, {"accuracy": True, "reward": True, "rollout_agreement": False, "merged_matches_last": False,
                   "profiles": True}, where)
    at = f"{where}.profiles"
    entries = _strict(data["profiles"], {name: True for name in profiles}, at)
    parsed: dict[str, ProfileExpect | NotMeasured] = {}
    for name, entry in entries.items():
        skipped = _not_measured(entry, f"{at}.{name}")
        if skipped:
            parsed[name] = skipped
            continue
        _strict(entry, {"seconds_per_step": True, "peak_memory_gib": True}, f"{at}.{name}")
        parsed[name] = ProfileExpect(
            seconds_per_step=_figure(entry["seconds_per_step"], f"{at}.{name}.seconds_per_step", "seconds"),
            peak_memory_gib=_figure(entry["peak_memory_gib"], f"{at}.{name}.peak_memory_gib", "memory"))
    return Expectations(
        accuracy=_accuracy(data["accuracy"], f"{where}.accuracy", test_rows),
        reward=_reward(data["reward"], f"{where}.reward"),
        rollout_agreement=(_agreement(data["rollout_agreement"], f"{where}.rollout_agreement")
                           if "rollout_agreement" in data else None),
        merged_matches_last=(_merged(data["merged_matches_last"], f"{where}.merged_matches_last")
                             if "merged_matches_last" in data else None),
        profiles=parsed,
    )


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


def _same_name(metric: str) -> str:
    return metric


def _accuracy_checks(exp: AccuracyExpect, run, summary: dict | None, logged=_same_name) -> list[Check]:
    """`logged` names a contract's metric as the run's verl logs it (VerlSpec.logged_metric)."""
    cited = "; ".join(f"{key}: {r.before} -> {r.accuracy}" if r.before is not None else f"{key}: {r.accuracy}"
                      for key in exp.cites for r in [reference.ACCURACY_RECORDS[key]])
    checks: list[Check] = []
    values: dict[str, float | None] = {"before": None, "after": None}
    if exp.source == "log":
        metric = logged(exp.metric)
        xs, ys = run.series(metric)
        start = _at_step(xs, ys, exp.before.step) if exp.before is not None else None
        for label, band in (("before", exp.before), ("after", exp.after)):
            if band is None:
                continue
            name = f"accuracy {label} training"
            found = _at_step(xs, ys, band.step)
            # "after" at the very step "before" read (one validation logged) says nothing about training
            same = label == "after" and found is not None and start is not None and found[0] == start[0]
            if found is None or same:
                why = (f"{metric} not logged" if not xs else
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
        read = logged(exp.metric) if exp.source == "log" else exp.metric
        if values["before"] is None or values["after"] is None:
            checks.append(Check(name, read, expected, "-", NOT_MEASURED, "needs both accuracies"))
        else:
            gain = values["after"] - values["before"]
            checks.append(Check(name, read, expected, f"{gain:+.4f}",
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


def _merged_check(exp: MergedExpect, run, summary: dict | None, logged=_same_name) -> Check:
    name = "merged model scores what the last trained step scored"
    logged_name = logged(exp.metric)
    metric = f"{logged_name} vs eval fast_eval.{EVAL_AFTER}.{exp.eval_metric}"
    expected = f"within {exp.tolerance:.3f}"
    xs, ys = run.series(logged_name)
    trained = ((summary or {}).get("fast_eval") or {}).get(EVAL_AFTER)
    score = trained.get(exp.eval_metric) if isinstance(trained, dict) else None
    if not xs or not isinstance(score, (int, float)):
        why = (f"{logged_name} not logged" if not xs else "no eval summary (--eval DIR)" if summary is None
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
    """Every expectation of `expect` against a run's metrics (rlrecipes.report.metrics.RunMetrics), an
    optional eval summary, and `settings` (the ResolvedRun of recipe x profile: for figures scaled from a
    record measured at other settings). Pure: reads nothing, writes nothing."""
    checks: list[Check] = []
    logged = settings.image.spec.logged_metric if settings is not None else _same_name
    if isinstance(expect.accuracy, NotMeasured):
        checks.append(Check("accuracy", "-", "-", "-", NOT_MEASURED, expect.accuracy.reason))
    else:
        checks += _accuracy_checks(expect.accuracy, run, summary, logged)
    if isinstance(expect.reward, NotMeasured):
        checks.append(Check("training reward rises", "-", "-", "-", NOT_MEASURED, expect.reward.reason))
    else:
        checks.append(_reward_check(expect.reward, run))
    if isinstance(expect.rollout_agreement, NotMeasured):
        checks.append(Check("rollout vs trainer", "-", "-", "-", NOT_MEASURED, expect.rollout_agreement.reason))
    elif expect.rollout_agreement is not None:
        checks += _bound_checks(expect.rollout_agreement, run)
    if expect.merged_matches_last is not None:
        checks.append(_merged_check(expect.merged_matches_last, run, summary, logged))
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
    from rlrecipes.recipe import list_recipes
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
    from rlrecipes.recipe import load_profile, load_recipe, resolve
    from rlrecipes.report.metrics import load_run

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
        from rlrecipes.evaluate import SUMMARY_FILE, load_summary

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

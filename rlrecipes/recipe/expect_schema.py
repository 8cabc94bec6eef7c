"""A recipe's expected result: the `expect:` block's schema, parsed strictly when the recipe loads
(rlrecipes.recipe.load.load_recipe). The judgement of a run against it is rlrecipes.after.expect.

The contract is data, like NeMo-RL's `tests/check_metrics.py` thresholds: bands and bounds on metrics
verl logs, no code per recipe. The schema is docs/expect.md. Outside figures stay in rlrecipes.reference: a
block points at a record there (`ref:`, `cites:`) rather than repeating its number, or names the measured
record under docs/bench/ that a figure comes from.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Any

from rlrecipes import reference
from rlrecipes.errors import RecipeError
from rlrecipes.paths import repo_root
from rlrecipes.recipe.strict import _strict, _typed
from rlrecipes.verl import rollout_sync
from rlrecipes.verl.logs import REWARD_KEYS
from rlrecipes.verl.run_metrics import STEP_TIME

# what `rlrecipes eval --fast-data` writes per model (evaluate.fast_eval)
EVAL_METRICS = ("accuracy", "flexible_accuracy")
# A misspelled metric would read as "not measured" and pass, so a contract names only metrics verl logs:
VALIDATION_PREFIXES = ("val-core/", "val-aux/", "val/")  # verl's validation metrics (0.5.0: val/test_score/)
# a launch's start-up, read from its console log (rlrecipes/verl/startup.py), not a logged metric
STARTUP = "launch to ready to fit"
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


REWARD_STATISTICS = ("window", "fitted")


@dataclass(frozen=True)
class RewardExpect:
    metric: str
    rise_min: float
    window: int | None = None     # window: the mean of the first K logged steps vs the mean of the last K
    statistic: str = "window"     # fitted: the least-squares slope over every logged step x the steps it spans
    min_steps: int | None = None  # fitted: the logged steps it needs


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
    gpu: str                   # the GPU model it was measured on: compared only with a run on that model


@dataclass(frozen=True)
class ProfileExpect:
    seconds_per_step: Figure | NotMeasured
    peak_memory_gib: Figure | NotMeasured
    startup_seconds: Figure | NotMeasured | None = None  # None: the contract names no start-up reference


# what a seed run or a control is judged on to derive a bound: the outcome checks whose bounds come from runs
SEEDED_CHECKS = ("accuracy", "reward", "rollout_agreement")


@dataclass(frozen=True)
class SeedRun:
    seed: int
    log: str                   # the run's log folder, under docs/bench/


@dataclass(frozen=True)
class Control:
    name: str
    log: str
    misses: tuple[str, ...]    # of SEEDED_CHECKS: the checks this control is there to fail


@dataclass(frozen=True)
class SeedRuns:
    """The runs a contract's outcome bounds come from (docs/expect.md, "Bounds from seeds"): its seed runs on
    one profile, and the controls each bound must still fail. benchmarks/seed_bounds.py derives the bounds."""
    profile: str
    runs: tuple[SeedRun, ...]
    controls: tuple[Control, ...]


@dataclass(frozen=True)
class Expectations:
    accuracy: AccuracyExpect | NotMeasured
    reward: RewardExpect | NotMeasured
    rollout_agreement: tuple[Bound, ...] | NotMeasured | None  # None: not part of this contract
    merged_matches_last: MergedExpect | None
    profiles: dict[str, ProfileExpect | NotMeasured]
    seeds: SeedRuns | None = None  # None: the contract names no seed runs (its bounds are set by hand)


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
    _strict(data, {"metric": True, "rise_min": True, "statistic": False, "window": False, "min_steps": False}, where)
    statistic = data.get("statistic", "window")
    if statistic not in REWARD_STATISTICS:
        raise RecipeError(f"unknown reward statistic {statistic!r}", where=f"{where}.statistic",
                          hint=f"one of {', '.join(REWARD_STATISTICS)}")
    # each statistic takes its own count: the other's is an error here, not a key silently ignored
    key, other, least = ("min_steps", "window", 3) if statistic == "fitted" else ("window", "min_steps", 1)
    if other in data:
        raise RecipeError(f"'{other}' does not go with statistic: {statistic}", where=f"{where}.{other}",
                          hint=f"statistic: {statistic} takes {key}")
    _strict(data, {"metric": True, "rise_min": True, "statistic": False, key: True}, where)
    count = _typed(data[key], int, f"{where}.{key}")
    if count < least:
        raise RecipeError(f"{key} must be >= {least}, got {count}", where=f"{where}.{key}")
    return RewardExpect(metric=_metric(data["metric"], f"{where}.metric", REWARD_KEYS),
                        rise_min=_number(data["rise_min"], f"{where}.rise_min"), statistic=statistic,
                        **{key: count})


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
    _strict(data, {"value": False, "ref": False, "source": False, "gpu": False, "tolerance": True,
                   "metric": kind == "memory"}, where)
    tolerance = _number(data["tolerance"], f"{where}.tolerance")
    if tolerance < 0:
        raise RecipeError(f"tolerance must be >= 0, got {tolerance}", where=f"{where}.tolerance")
    if kind == "memory":
        metric = _metric(data["metric"], f"{where}.metric", MEMORY_METRICS)
    else:
        metric = STEP_TIME if kind == "seconds" else STARTUP
    if kind == "startup" and "ref" in data:
        raise RecipeError("a start-up figure is a value with its source; rlrecipes/reference.py records none",
                          where=f"{where}.ref")
    if ("value" in data) == ("ref" in data):
        raise RecipeError("give value (with source) or ref, one of the two", where=where)
    if "ref" in data:
        key = _text(data["ref"], f"{where}.ref")
        for own in ("source", "gpu"):
            if own in data:
                raise RecipeError(f"a ref's {own} is its record's; drop {own}", where=f"{where}.{own}")
        found = reference.record(key)
        if kind == "seconds":
            if not (isinstance(found, reference.Throughput) and found.kind == "step_seconds"):
                keys = [t.key for t in reference.THROUGHPUTS if t.kind == "step_seconds"]
                raise RecipeError(f"no whole-step time named {key!r} in rlrecipes/reference.py", where=f"{where}.ref",
                                  hint=f"known: {', '.join(keys)}")
            return Figure(metric=metric, value=None, tolerance=tolerance, source=found.source, ref=key, gpu=found.gpu)
        if not isinstance(found, reference.MeasuredMemory):
            raise RecipeError(f"no memory measurement named {key!r} in rlrecipes/reference.py", where=f"{where}.ref",
                              hint=f"known: {', '.join(m.key for m in reference.MEASURED_MEMORY)}")
        return Figure(metric=metric, value=_memory_phase(found, metric, f"{where}.ref"), tolerance=tolerance,
                      source=found.source, ref=key, gpu=found.gpu)
    value = _number(data["value"], f"{where}.value")
    if value <= 0:
        raise RecipeError(f"expected a positive figure, got {value}", where=f"{where}.value")
    if "source" not in data:
        raise RecipeError("missing required key 'source' (the measured record the figure comes from)", where=where)
    source = _check_source(_text(data["source"], f"{where}.source"), f"{where}.source")
    if "gpu" not in data:
        raise RecipeError("missing required key 'gpu' (the GPU model the figure was measured on)", where=where,
                          hint="as nvidia-smi names it, e.g. gpu: NVIDIA H200")
    return Figure(metric=metric, value=value, tolerance=tolerance, source=source, ref=None,
                  gpu=_gpu(data["gpu"], f"{where}.gpu"))


def _gpu(value: Any, where: str) -> str:
    """A GPU model, as nvidia-smi names it: a cost measured on one GPU is no reference for "any" GPU."""
    name = _text(value, where)
    if name.lower().startswith("any"):
        raise RecipeError(f"a cost is measured on one GPU model, not {name!r}", where=where,
                          hint="name the GPU the figure was measured on, e.g. NVIDIA H200")
    return name


def _memory_phase(record: reference.MeasuredMemory, metric: str, where: str) -> float:
    """The measured phase that is what `metric` logs: reference.MEASURED_MEMORY's phases name the metric they
    were read from in parentheses ("actor update, trainer allocator peak (actor/perf/max_memory_allocated_gb)")."""
    for what, measured, _estimate, _phase in record.phases:
        if f"({metric})" in what or f"'s {metric})" in what:
            return measured
    raise RecipeError(f"record {record.key!r} has no phase measured as {metric}", where=where,
                      hint="its phases: " + "; ".join(p[0] for p in record.phases))


def _seeds(data: Any, where: str, profiles: tuple[str, ...]) -> SeedRuns:
    _strict(data, {"profile": True, "runs": True, "controls": False}, where)
    profile = _text(data["profile"], f"{where}.profile")
    if profile not in profiles:
        raise RecipeError(f"{profile!r} is not one of the recipe's profiles", where=f"{where}.profile",
                          hint=f"its profiles: {', '.join(profiles)}")
    runs: list[SeedRun] = []
    for index, entry in enumerate(_typed(data["runs"], list, f"{where}.runs")):
        at = f"{where}.runs[{index}]"
        _strict(entry, {"seed": True, "log": True}, at)
        seed = _typed(entry["seed"], int, f"{at}.seed")
        if seed < 0 or seed in {r.seed for r in runs}:
            raise RecipeError(f"seed {seed} is negative or named twice", where=f"{at}.seed")
        runs.append(SeedRun(seed=seed, log=_check_source(_text(entry["log"], f"{at}.log"), f"{at}.log")))
    if not runs:
        raise RecipeError("expected at least one seed run", where=f"{where}.runs")
    controls: list[Control] = []
    for index, entry in enumerate(_typed(data.get("controls") or [], list, f"{where}.controls")):
        at = f"{where}.controls[{index}]"
        _strict(entry, {"name": True, "log": True, "misses": True}, at)
        misses = tuple(_typed(entry["misses"], list, f"{at}.misses"))
        for position, check in enumerate(misses):
            if check not in SEEDED_CHECKS:
                raise RecipeError(f"{check!r} is not a check bounds are derived for", where=f"{at}.misses[{position}]",
                                  hint=f"one of {', '.join(SEEDED_CHECKS)}")
        if not misses:
            raise RecipeError("a control misses at least one check", where=f"{at}.misses")
        controls.append(Control(name=_text(entry["name"], f"{at}.name"),
                                log=_check_source(_text(entry["log"], f"{at}.log"), f"{at}.log"),
                                misses=tuple(map(str, misses))))
    return SeedRuns(profile=profile, runs=tuple(runs), controls=tuple(controls))


def parse_expect(data: Any, where: str, profiles: tuple[str, ...], test_rows: int | None = None) -> Expectations:
    """The `expect:` block of a recipe whose profiles are `profiles` (and whose test split has `test_rows`
    rows); RecipeError naming the key when malformed."""
    if data is None:
        raise RecipeError("the expect: block is empty", where=where, hint="see docs/expect.md")
    _strict(data, {"accuracy": True, "reward": True, "rollout_agreement": False, "merged_matches_last": False,
                   "profiles": True, "seeds": False}, where)
    at = f"{where}.profiles"
    entries = _strict(data["profiles"], {name: True for name in profiles}, at)
    parsed: dict[str, ProfileExpect | NotMeasured] = {}
    for name, entry in entries.items():
        skipped = _not_measured(entry, f"{at}.{name}")
        if skipped:
            parsed[name] = skipped
            continue
        _strict(entry, {"seconds_per_step": True, "peak_memory_gib": True, "startup_seconds": False}, f"{at}.{name}")
        parsed[name] = ProfileExpect(
            seconds_per_step=_figure(entry["seconds_per_step"], f"{at}.{name}.seconds_per_step", "seconds"),
            peak_memory_gib=_figure(entry["peak_memory_gib"], f"{at}.{name}.peak_memory_gib", "memory"),
            startup_seconds=(_figure(entry["startup_seconds"], f"{at}.{name}.startup_seconds", "startup")
                             if "startup_seconds" in entry else None))
    return Expectations(
        accuracy=_accuracy(data["accuracy"], f"{where}.accuracy", test_rows),
        reward=_reward(data["reward"], f"{where}.reward"),
        rollout_agreement=(_agreement(data["rollout_agreement"], f"{where}.rollout_agreement")
                           if "rollout_agreement" in data else None),
        merged_matches_last=(_merged(data["merged_matches_last"], f"{where}.merged_matches_last")
                             if "merged_matches_last" in data else None),
        profiles=parsed,
        seeds=_seeds(data["seeds"], f"{where}.seeds", profiles) if "seeds" in data else None,
    )

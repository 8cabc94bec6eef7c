"""Read a run's training metrics from the files verl writes, across restarts.

Two real formats, one per image, parsed line by line by rlrecipes.verl.logs:

- verl's file logger (A100 image): JSONL. It opens its file with "wb", so each launch gets its own
  ``metrics-<stamp>.jsonl``.
- verl's console logger (P40 image, the only metrics source there): the run's ``console-<stamp>.log``
  is a tee of the trainer's stdout.

A run directory holds one file per launch. Launches are ordered by the stamp in their name; a later
launch (a resume) replaces the earlier launches' steps after its first logged step, and adds its values
to that first step (the resume step, where it logs validation only).
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from rlrecipes.errors import RecipeError
from rlrecipes.verl.logs import REWARD_KEYS, parse_console_line, parse_jsonl_record

JSONL_GLOB = "metrics-*.jsonl"
CONSOLE_GLOB = "console-*.log"

_STAMP = re.compile(r"^(?:metrics|console)-(.+)\.(?:jsonl|log)$")


@dataclass
class Launch:
    """One launch of a run: the metrics of one log file."""

    path: Path
    kind: str  # "jsonl" | "console"
    stamp: str
    steps: dict[int, dict[str, float]] = field(default_factory=dict)
    truncated: bool = False  # the last line was cut off (the process died mid-write)
    skipped_lines: int = 0  # unreadable lines other than a truncated last one

    @property
    def first_step(self) -> int | None:
        return min(self.steps) if self.steps else None

    @property
    def last_step(self) -> int | None:
        return max(self.steps) if self.steps else None


@dataclass
class RunMetrics:
    """Metrics of all launches of one run, restarts resolved: step -> {metric: value}."""

    steps: dict[int, dict[str, float]]
    launches: list[Launch]
    warnings: list[str]
    # step at which each later launch took over (for drawing restart markers)
    restarts: list[int] = field(default_factory=list)

    @property
    def keys(self) -> list[str]:
        seen: set[str] = set()
        for values in self.steps.values():
            seen.update(values)
        return sorted(seen)

    def series(self, key: str) -> tuple[list[int], list[float]]:
        xs, ys = [], []
        for step in sorted(self.steps):
            value = self.steps[step].get(key)
            if value is not None and not math.isnan(value):
                xs.append(step)
                ys.append(value)
        return xs, ys

    def logged(self, key: str) -> tuple[list[int], list[float]]:
        """Every step that logged `key`, with its value as logged: NaN (orjson's null) and inf included."""
        xs = [step for step in sorted(self.steps) if key in self.steps[step]]
        return xs, [self.steps[step][key] for step in xs]

    def has(self, key: str) -> bool:
        return bool(self.series(key)[0])


def stamp_of(path: Path) -> str:
    match = _STAMP.match(path.name)
    return match.group(1) if match else path.stem


def read_jsonl(path: str | Path) -> Launch:
    path = Path(path)
    launch = Launch(path=path, kind="jsonl", stamp=stamp_of(path))
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    complete_end = raw.endswith(b"\n")
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        is_last = index == len(lines) - 1
        try:
            step, metrics = parse_jsonl_record(line)
        except (ValueError, KeyError, TypeError):
            if is_last and not complete_end:
                launch.truncated = True
            else:
                launch.skipped_lines += 1
            continue
        launch.steps.setdefault(step, {}).update(metrics)
    return launch


def read_console(path: str | Path) -> Launch:
    path = Path(path)
    launch = Launch(path=path, kind="console", stamp=stamp_of(path))
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = text.split("\n")
    complete_end = text.endswith("\n")
    for index, line in enumerate(lines):
        parsed = parse_console_line(line)
        if parsed is None:
            continue
        step, metrics = parsed
        if index == len(lines) - 1 and not complete_end:
            # Cut off mid-write: the last pair may hold half a number. Keep the pairs before it.
            launch.truncated = True
            cut = line.rfind(" - ")
            metrics = parse_console_line(line[:cut])[1] if cut > 0 else {}
            if not metrics:
                continue
        launch.steps.setdefault(step, {}).update(metrics)
    return launch


def read_log(path: str | Path) -> Launch:
    path = Path(path)
    if not path.is_file():
        raise RecipeError("log file not found", where=str(path))
    if path.suffix == ".jsonl":
        return read_jsonl(path)
    return read_console(path)


def discover(log_dir: str | Path) -> list[Path]:
    """The metrics files of a run's log directory; JSONL wins over the console log of the same launch."""
    log_dir = Path(log_dir)
    if not log_dir.is_dir():
        raise RecipeError("run log directory not found", where=str(log_dir),
                          hint="pass the run's directory under LOG_DIR, or --log FILE")
    jsonl = sorted(log_dir.glob(JSONL_GLOB))
    stamps = {stamp_of(p) for p in jsonl}
    console = [p for p in sorted(log_dir.glob(CONSOLE_GLOB)) if stamp_of(p) not in stamps]
    return jsonl + console


def log_inputs(log_dir: str | Path | None, logs: list[str | Path]) -> list:
    """The run's logs as the inputs an --out must not overwrite (rlrecipes.fsutil): the folder, each log
    in it, each --log file, and any new name in the folder that `discover` would read."""
    from rlrecipes.fsutil import Input

    inputs = [Input("the run's log directory", log_dir, reads=(JSONL_GLOB, CONSOLE_GLOB))]
    found = discover(log_dir) if log_dir is not None and Path(log_dir).is_dir() else []
    return inputs + [Input("the metrics log", path) for path in [*found, *logs]]


def combine(launches: list[Launch]) -> RunMetrics:
    """Join launches in stamp order; each later launch replaces earlier steps from its first step on."""
    ordered = sorted(launches, key=lambda launch: (launch.stamp, str(launch.path)))
    steps: dict[int, dict[str, float]] = {}
    warnings: list[str] = []
    restarts: list[int] = []
    for launch in ordered:
        if launch.truncated:
            warnings.append(f"{launch.path.name}: last line cut off (ignored)")
        if launch.skipped_lines:
            warnings.append(f"{launch.path.name}: {launch.skipped_lines} unreadable line(s) skipped")
        if not launch.steps:
            warnings.append(f"{launch.path.name}: no metrics")
            continue
        first = launch.first_step
        if steps:
            # A resume from the step-K checkpoint logs its validation at step K, then trains K+1, ...:
            # step K keeps the earlier launch's training metrics (later values win key by key); every
            # step after K is redone by this launch.
            replaced = [s for s in steps if s > first]
            for step in replaced:
                del steps[step]
            restarts.append(first)
            if replaced:
                warnings.append(
                    f"{launch.path.name}: resumed at step {first}; replaced {len(replaced)} later step(s) of "
                    "the earlier launch"
                )
        for step, values in launch.steps.items():
            steps.setdefault(step, {}).update(values)
    return RunMetrics(steps=dict(sorted(steps.items())), launches=ordered, warnings=warnings, restarts=restarts)


def load_run(log_dir: str | Path | None = None, logs: list[str | Path] | None = None) -> RunMetrics:
    paths = [Path(p) for p in (logs or [])]
    if log_dir is not None:
        paths = discover(log_dir) + paths
    if not paths:
        where = str(log_dir) if log_dir is not None else "--log"
        raise RecipeError(
            f"no metrics files ({JSONL_GLOB} or {CONSOLE_GLOB})", where=where,
            hint="verl 0.8 writes metrics-<stamp>.jsonl (trainer.logger includes 'file'); on verl 0.5 tee "
                 "stdout to console-<stamp>.log",
        )
    return combine([read_log(p) for p in paths])


# -- what a reader wants to know from the metrics ---------------------------------------------------



def accuracy_key(run: RunMetrics) -> str | None:
    """The validation accuracy metric verl logged (val-core/<data source>/<reward|acc>/mean@N)."""
    keys = [k for k in run.keys if k.startswith("val-core/") and "/mean@" in k]
    if not keys:
        keys = [k for k in run.keys if k.startswith("val/test_score/")]
    if not keys:
        return None
    keys.sort(key=lambda k: (0 if "/acc/" in k else 1 if "/reward/" in k else 2, k))
    return keys[0]


def headline(run: RunMetrics) -> dict:
    """The numbers a reader wants first: accuracy start/end/best, steps, time, tokens, reward."""
    out: dict = {
        "first_step": min(run.steps) if run.steps else None,
        "last_step": max(run.steps) if run.steps else None,
        "launches": len(run.launches),
        "restarts": len(run.restarts),
    }
    key = accuracy_key(run)
    out["accuracy_metric"] = key
    if key:
        xs, ys = run.series(key)
        if xs:
            best = max(range(len(ys)), key=lambda i: (ys[i], -xs[i]))
            out.update(start_step=xs[0], start_accuracy=ys[0], end_step=xs[-1], end_accuracy=ys[-1],
                       best_step=xs[best], best_accuracy=ys[best])
    for reward_key in REWARD_KEYS:
        xs, ys = run.series(reward_key)
        if xs:
            out.update(reward_metric=reward_key, start_reward=ys[0], end_reward=ys[-1])
            break
    step_times = run.series(STEP_TIME)[1] or run.series("perf/time_per_step")[1]
    if step_times:
        out["train_seconds"] = sum(step_times)
        out["seconds_per_step"] = sum(step_times) / len(step_times)
    tokens = run.series("perf/total_num_tokens")[1]
    if tokens:
        out["tokens"] = int(sum(tokens))
    throughput = run.series("perf/throughput")[1]
    if throughput:
        out["throughput"] = sum(throughput) / len(throughput)
    return out


# -- where a step's time goes ------------------------------------------------------------------------

STEP_TIME = "timing_s/step"
VALIDATION_TIME = "timing_s/testing"
# verl's per-phase timers (trainer/ppo/ray_trainer.py, `marked_timer`), by the name plan and report show
PHASE_TIMES: tuple[tuple[str, str], ...] = (
    ("gen", "timing_s/gen"), ("old_log_prob", "timing_s/old_log_prob"), ("ref", "timing_s/ref"),
    ("values", "timing_s/values"), ("update_critic", "timing_s/update_critic"),
    ("update_actor", "timing_s/update_actor"), ("update_weights", "timing_s/update_weights"),
    ("save", "timing_s/save_checkpoint"), ("validation", VALIDATION_TIME))
MFU_PREFIX = "perf/mfu/"  # verl's model FLOPs utilisation per worker: perf/mfu/actor, perf/mfu/critic, ...


def warmup_steps(run: RunMetrics) -> set[int]:
    """The first timed step of each launch: start-up (vLLM's graph capture, caches warming) is in its time."""
    firsts = set()
    for launch in run.launches:
        timed = sorted(s for s, m in launch.steps.items() if STEP_TIME in m)
        if timed:
            firsts.add(timed[0])
    return firsts


def steady_step_times(run: RunMetrics) -> tuple[list[int], list[float]]:
    """timing_s/step of the training steps in steady state: without the first timed step of each launch
    (start-up: vLLM's graph capture, caches warming) and without the steps that also ran validation (verl
    times its validation inside the step, `timing_s/testing`: its cost follows test_freq and the test set,
    not the training)."""
    firsts = warmup_steps(run)
    xs, ys = run.series(STEP_TIME)
    kept = [(x, y) for x, y in zip(xs, ys) if x not in firsts and VALIDATION_TIME not in run.steps[x]]
    return [x for x, _ in kept], [y for _, y in kept]


def steady_step_mean(run: RunMetrics) -> tuple[float, int] | None:
    """The mean of the steady-state step times (steady_step_times) and how many steps it is over; None where the
    run logged none. The one s/step statistic: `expect` weighs a run's cost by it, `plan` a record's other hosts."""
    _, ys = steady_step_times(run)
    return (sum(ys) / len(ys), len(ys)) if ys else None


def phase_medians(run: RunMetrics) -> dict:
    """Each phase's median seconds and each MFU's median over the steps that logged it, a launch's first timed
    step left out where other steps logged the same key: {"phases": {name: {metric, median_s, steps}},
    "mfu": {metric: {median, steps}}, "warmup_steps_left_out": [...]}. A phase or MFU the run never logged is
    absent (never 0)."""
    warm = warmup_steps(run)

    def median_of(key: str) -> tuple[float, int] | None:
        xs, ys = run.series(key)
        kept = [y for x, y in zip(xs, ys) if x not in warm] or ys
        return (statistics.median(kept), len(kept)) if kept else None

    phases = {}
    for name, key in PHASE_TIMES:
        found = median_of(key)
        if found:
            phases[name] = {"metric": key, "median_s": found[0], "steps": found[1]}
    mfu = {}
    for key in run.keys:
        found = median_of(key) if key.startswith(MFU_PREFIX) else None
        if found:
            mfu[key] = {"median": found[0], "steps": found[1]}
    return {"phases": phases, "mfu": mfu, "warmup_steps_left_out": sorted(warm)}

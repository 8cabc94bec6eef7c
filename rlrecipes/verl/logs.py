"""verl's log formats, parsed in one place (the smoke stage and the report both read them).

- Console logger (every version; the only metrics source on verl 0.5.0, which has no file logger):
  lines ``step:1 - critic/score/mean:0.5 - actor/grad_norm:1.2`` from
  `verl/utils/logger/aggregate_logger.py`, each value printed with ``pprint.pformat`` -- so numpy scalars
  read ``np.float64(0.5)`` under numpy 2 -- and, because the trainer runs in a Ray actor, usually behind
  Ray's ``(TaskRunner pid=123)`` prefix with colour codes, sometimes with Ray's
  ``[repeated 2x across cluster]`` suffix.
- File logger (verl >= 0.8, `trainer.logger` includes ``file``): JSONL lines ``{"step": N, "data": {...}}``
  written with orjson (`verl/utils/tracking.py` FileLogger; NaN becomes null).
- The resume message: verl <= 0.8 and 0.9.1's legacy trainer print "Setting global step to N"; 0.9.1's
  V1 trainer logs "Resuming from <dir>, setting global step to N".

Pure functions of text, standard library only.
"""

from __future__ import annotations

import json
import math
import re

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# `step:N` at the start of the console logger's line, possibly behind Ray's "(Actor pid=1) " prefix;
# the metrics follow after " - ".
_STEP_LINE = re.compile(r"(?:^\s*|\)\s+)step:(\d+)(?: - (.*))?$")
# pprint of numpy scalars under numpy >= 2: np.float64(0.5), np.int64(3), np.True_
_NUMPY_WRAPPED = re.compile(r"^(?:np|numpy)\.\w+\((.*)\)$")
_RAY_REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")
_RESUMED = re.compile(r"[Ss]etting global step to (\d+)")
# The training reward as verl logs it: the score, and the reward after KL-in-reward when that is on.
REWARD_KEYS = ("critic/score/mean", "critic/rewards/mean")


def parse_value(text: str) -> float | None:
    """A number as the console logger prints it (pprint), or None when it is not a number."""
    text = text.strip()
    wrapped = _NUMPY_WRAPPED.match(text)
    if wrapped:
        text = wrapped.group(1).strip()
    if text in ("True", "np.True_"):
        return 1.0
    if text in ("False", "np.False_"):
        return 0.0
    try:
        return float(text)  # also 'nan', 'inf', '-inf', '1e-05'
    except ValueError:
        return None


def _step_match(line: str) -> re.Match | None:
    return _STEP_LINE.search(_RAY_REPEATED.sub("", _ANSI.sub("", line).rstrip("\r\n")))


def parse_console_line(line: str) -> tuple[int, dict[str, float]] | None:
    """(step, metrics) of one console logger line, or None for any other line."""
    match = _step_match(line)
    if not match:
        return None
    metrics: dict[str, float] = {}
    for part in (match.group(2) or "").split(" - "):
        key, sep, raw = part.rpartition(":")
        if not sep or not key:
            continue
        value = parse_value(raw)
        if value is not None:
            metrics[key.strip()] = value
    return int(match.group(1)), metrics


def console_step(line: str) -> int | None:
    """The step of a console line that carries metrics (`step:N - ...`), else None: a step finished."""
    match = _step_match(line)
    return int(match.group(1)) if match and match.group(2) is not None else None


def parse_steps(text: str) -> dict[int, dict[str, float]]:
    """{step: {metric: value}} from console output: every `step:N - ...` line (the last of a step wins)."""
    steps: dict[int, dict[str, float]] = {}
    for line in text.splitlines():
        if console_step(line) is None:
            continue
        step, metrics = parse_console_line(line)
        steps[step] = metrics
    return steps


def resumed_from(text: str) -> int | None:
    """The global step a launch resumed from ("Setting global step to N"), None if it started fresh."""
    match = _RESUMED.search(text)
    return int(match.group(1)) if match else None


def resumed_without_training(text: str, total_steps: int | None = None) -> int | None:
    """The step a launch resumed from when it then logged no training step after it (else None).

    verl's epoch-boundary bug: resuming from a checkpoint saved exactly at the end of an epoch restored a
    dataloader state marked exhausted into the next epoch's loop, which yielded no batch, and the run
    exited 0 having trained nothing (verl PR #5725, in 0.8.0 and 0.9.1: `_load_checkpoint` skips the
    dataloader state at a boundary; 0.5.0 loops over every epoch from 0 and stops on the step count, so the
    empty first pass is followed by the next epoch). A resume from the last step (`total_steps`) has
    nothing left to train and is not reported.
    """
    start = resumed_from(text)
    if start is None or (total_steps is not None and start >= total_steps):
        return None
    trained = [step for step in parse_steps(text) if step > start]
    return None if trained else start


_MAX_STEP = 2**53  # beyond it a step is no whole float, and no run trains that long


def _step_number(value) -> int:
    """A logged step: a whole number >= 0. NaN, infinity (int() raised OverflowError), 1.5, true, "3" are
    not steps."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"step {value!r} is not a number")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise ValueError(f"step {value!r} is not a whole number")
    if value < 0:
        raise ValueError(f"step {value!r} is negative")
    if value > _MAX_STEP:
        raise ValueError("step is too large")
    return int(value)


def _number(value: int | float) -> float:
    """A logged number as a float; an integer too large for one (401 digits) is infinite: a value the
    check that reads it calls out, not a crash."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _coerce(data: dict) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in data.items():
        if isinstance(value, (bool, int, float)):
            out[key] = _number(value)
        elif value is None:  # orjson writes NaN as null
            out[key] = float("nan")
    return out


def parse_jsonl_record(line: bytes | str) -> tuple[int, dict[str, float]]:
    """(step, metrics) of one file-logger line; ValueError, KeyError or TypeError when it is not one."""
    try:
        record = json.loads(line)
    except RecursionError as exc:  # nested deeper than the parser's stack
        raise ValueError("nested too deeply") from exc
    step = _step_number(record["step"])
    data = record["data"]
    if not isinstance(data, dict):
        raise TypeError("data is not an object")
    return step, _coerce(data)


# The console log holds the config the trainer printed at start-up (pprint of the resolved config, every
# version), with `trainer.experiment_name` -- which rlrecipes sets to the recipe's name. verl's file logger
# writes only {"step", "data"}: a JSONL file carries nothing that names its run.
_EXPERIMENT = re.compile(r"'experiment_name':\s*'([^']*)'")


def experiment_names(text: str) -> set[str]:
    """The `experiment_name` values of the config printed in a console log (empty: none printed)."""
    return set(_EXPERIMENT.findall(_ANSI.sub("", text)))

"""How long a run takes: the measured figure that applies (rlrecipes/reference.py), scaled to the run, as a range
from responses at the recorded run's mean length to responses at the maximum, plus what the recorded run timed of
validation and saves and its start-up (its console log: rlrecipes/verl/startup.py), its phases and MFU. The plan
stage's, since it reads the recorded run's metrics file (rlrecipes/verl/run_metrics.py), which the reference layer
may not import."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rlrecipes.paths import repo_root
from rlrecipes.reference import Throughput, same_gpu, step_seconds_at, throughput_for
from rlrecipes.verl.run_metrics import load_run, phase_medians, steady_step_mean, steady_step_times
from rlrecipes.verl.startup import read_startup, run_startups


@dataclass(frozen=True)
class RecordedRun:
    """What a figure's recorded run says beside the figure (rlrecipes.verl.run_metrics reads it)."""

    source: str                          # the metrics file, relative to the repository
    mean_response_length: float | None   # response_length/mean over the steady steps the figure is from
    phases: dict = field(default_factory=dict)  # phase -> {metric, median_s, steps, source}
    mfu: dict = field(default_factory=dict)     # perf/mfu/* -> {median, steps, source}
    startup_seconds: float | None = None        # its first launch to verl's "ready to fit" (its console log)
    startup_from: str = ""                      # what startup_seconds is timed from: "launch", or "ray" where the
                                                # log has no launch stamp (Ray's start to "ready to fit"); "": none


def recorded_run(t: Throughput) -> RecordedRun | str:
    """The figure's recorded run, or why there is none."""
    if not t.metrics:
        return f"not recorded: no machine-readable record of the measured run (only {t.source})"
    path = repo_root() / t.metrics
    if not path.is_file():
        return f"not recorded: {t.metrics} is not in this install (a checkout of the repository has it)"
    run = load_run(logs=[path])
    steady, _ = steady_step_times(run)
    lengths = [run.steps[x]["response_length/mean"] for x in steady if "response_length/mean" in run.steps[x]]
    medians = phase_medians(run)
    if t.console:  # a console log named otherwise than console-<stamp>.log beside the metrics file
        console = repo_root() / t.console
        startups = [read_startup(console)] if console.is_file() else []
    else:
        startups = run_startups([path])
    whole = [s for s in startups if s is not None and s.complete]
    from_ray = [s.ray_to_ready_s for s in startups if s is not None and s.ray_to_ready_s is not None]
    startup = (whole[0].total_s, "launch") if whole else (from_ray[0], "ray") if from_ray else (None, "")
    return RecordedRun(
        source=t.metrics, mean_response_length=sum(lengths) / len(lengths) if lengths else None,
        phases={name: {**v, "source": t.metrics} for name, v in medians["phases"].items()},
        mfu={key: {**v, "source": t.metrics} for key, v in medians["mfu"].items()},
        startup_seconds=startup[0], startup_from=startup[1])


def other_hosts(t: Throughput) -> tuple[dict, ...]:
    """The figure's runs on other hosts (Throughput.hosts), each as the figure itself is taken -- the steady mean of
    timing_s/step (rlrecipes.verl.run_metrics.steady_step_mean, as `rlrecipes expect` weighs s/step): {source,
    gpu, seconds_per_step, steps}. A folder not in this install (an image without docs/) is left out."""
    found = []
    for folder, gpu in t.hosts:
        path = repo_root() / folder
        steady = steady_step_mean(load_run(path)) if path.is_dir() else None
        if steady is not None:
            found.append({"source": folder, "gpu": gpu, "seconds_per_step": steady[0], "steps": steady[1]})
    return tuple(found)


def validation_count(total_steps: int, test_freq: int, val_before_train: bool) -> int:
    """The validations verl runs in a run of `total_steps` (ray_trainer.fit): one before training when
    val_before_train, then at every test_freq-th step and at the last step (once where they coincide)."""
    during = total_steps // test_freq + (1 if total_steps % test_freq else 0) if test_freq > 0 else 0
    return int(bool(val_before_train)) + during


STARTUP_NOT_RECORDED = "not recorded (the figure's record has no console log of this recipe to time it from)"
# a start-up as recorded: the run's first launch; a host's second launch was faster, another host slower
STARTUP_RECORDED = ("{seconds:.0f} s as recorded (launch to verl's 'ready to fit', a host's first launch; each "
                    "resume pays it again: docs/bench/gpu-overhead.md)")
# a record whose console log has no launch stamp times its start-up from Ray's start
STARTUP_FROM_RAY = ("{seconds:.0f} s as recorded from Ray's start to verl's 'ready to fit' (the launch to Ray before it "
                    "is not in that record; each resume pays it again: docs/bench/gpu-overhead.md)")


@dataclass(frozen=True)
class TimeEstimate:
    seconds_per_step: float      # responses at this run's maximum length: the high end of the range
    total_seconds: float | None  # the steps alone at seconds_per_step; None when the number of steps is unknown
    covers: str                  # a whole step, or the rollout only
    kind: str
    measured: float
    measured_on: str
    source: str
    gpu: str                     # the GPU model the figure was measured on
    profile_gpu: str             # the GPU the profile names
    same_gpu: bool               # whether they are one model
    scaled: str                  # how the figure was scaled to this run's settings; "" when it was not
    max_response_length: int
    recorded_mean_length: float | None    # the recorded run's mean response length; None: not recorded
    low_seconds_per_step: float | None    # responses at that mean length; None: not recorded
    validations: int                      # how many validations the run does
    validation_seconds: float | None      # one validation as recorded (timing_s/testing); None: not recorded
    saves: int
    save_seconds: float | None            # one checkpoint save as recorded (timing_s/save_checkpoint)
    startup: str
    startup_seconds: float | None         # the recorded run's start-up, in the totals; None: not recorded
    startup_from: str                     # "launch", "ray" (the record's log has no launch stamp), "": none
    low_total_seconds: float | None       # steps at the low end + what is recorded of validation and saves
    high_total_seconds: float | None
    record: str                           # the recorded run's metrics file, or why there is none
    phases: dict                          # phase -> {metric, median_s, steps, source} of the recorded run
    mfu: dict                             # perf/mfu/* -> {median, steps, source}
    generation_poll_s: float | None = None  # this run's replay-buffer poll (verl 0.9's V1 trainer); None: none
    recorded_poll_s: float | None = None    # the poll the records were timed with (verl's own: no record set another)
    hosts: tuple[dict, ...] = ()            # the same recipe and profile on other hosts (other_hosts)


def estimate_time(recipe: str, profile: str, hub_id: str, get: Callable[[str], object], n_gpus: int,
                  tensor_parallel: int, responses_per_step: int, max_response_length: int,
                  total_steps: int | None, profile_gpu: str = "", validations: int = 0,
                  saves: int = 0, generation_poll_s: float | None = None,
                  recorded_poll_s: float | None = None) -> TimeEstimate | None:
    """Seconds per step and for the whole run from the measured throughput that applies, or None: a range from
    responses at the recorded run's mean length to responses at the maximum, plus validation and checkpoint
    saves where the recorded run timed them."""
    t = throughput_for(recipe, profile, hub_id, get)
    if t is None:
        return None
    rec = recorded_run(t)
    mean = rec.mean_response_length if isinstance(rec, RecordedRun) else None
    tokens = responses_per_step * max_response_length
    if t.kind == "step_seconds":
        # the measured step generated its responses' actual lengths: the recorded mean where there is one
        measured_length = mean or t.max_response_length
        per_step = step_seconds_at(t, responses_per_step, max_response_length, measured_length)
        covers = "whole step (scaled by generated tokens from the measured settings)"
        settings = (responses_per_step, float(max_response_length))
        scaled = "" if settings == (t.responses_per_step, measured_length) else (
            f"scaled by generated tokens from {t.responses_per_step} x {measured_length:.0f} (as measured) to "
            f"{responses_per_step} x {max_response_length} (responses at the maximum length)")
    else:
        engines = max(1, n_gpus // max(1, tensor_parallel))
        per_step = tokens / (t.value * engines)
        covers = (f"rollout only ({responses_per_step} responses x {max_response_length} tokens over {engines} "
                  f"vLLM engine(s)); the training phases are not measured on this stack, so a step takes longer")
        scaled = f"a rollout rate of one engine, scaled to {engines} engine(s) and {responses_per_step} x " \
                 f"{max_response_length} tokens"
    if t.recipe is not None and t.recipe != recipe:  # a sibling's figure (Throughput.siblings)
        scaled = (f"{t.recipe}'s step, not this recipe's: the same model, batch, rollout and updates with another "
                  "advantage or loss, not timed itself") + (f"; {scaled}" if scaled else "")
    low = per_step * min(mean, max_response_length) / max_response_length if mean else None
    phases = rec.phases if isinstance(rec, RecordedRun) else {}
    # a validation's time belongs to the recipe's test set: only a record of this recipe has it
    validation = phases.get("validation", {}).get("median_s") if t.recipe == recipe else None
    save = phases.get("save", {}).get("median_s") if t.recipe == recipe else None
    # and so does its start-up (the model, the engine): only a record of this recipe has it
    startup = rec.startup_seconds if isinstance(rec, RecordedRun) and t.recipe == recipe else None
    startup_text = STARTUP_NOT_RECORDED if startup is None else (
        STARTUP_FROM_RAY if rec.startup_from == "ray" else STARTUP_RECORDED).format(seconds=startup)
    extra = validations * (validation or 0.0) + saves * (save or 0.0) + (startup or 0.0)
    return TimeEstimate(
        seconds_per_step=per_step, total_seconds=per_step * total_steps if total_steps else None,
        covers=covers, kind=t.kind, measured=t.value, measured_on=t.measured_on, source=t.source, gpu=t.gpu,
        profile_gpu=profile_gpu, same_gpu=same_gpu(profile_gpu, t.gpu), scaled=scaled,
        max_response_length=max_response_length, recorded_mean_length=mean, low_seconds_per_step=low,
        validations=validations, validation_seconds=validation, saves=saves, save_seconds=save,
        startup=startup_text,
        startup_seconds=startup,
        startup_from=rec.startup_from if startup is not None else "",
        low_total_seconds=low * total_steps + extra if total_steps and low is not None else None,
        high_total_seconds=per_step * total_steps + extra if total_steps else None,
        record=rec.source if isinstance(rec, RecordedRun) else rec,
        phases=phases, mfu=rec.mfu if isinstance(rec, RecordedRun) else {}, generation_poll_s=generation_poll_s,
        recorded_poll_s=recorded_poll_s, hosts=other_hosts(t) if t.recipe == recipe else ())

"""`rlrecipes plan RECIPE`: the resolved plan (image, batch arithmetic, schedule, checkpoints, memory, time, launch)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from rlrecipes.cli.arguments import recipe_arguments, resolve_recipe
from rlrecipes.errors import RecipeError

if TYPE_CHECKING:
    from rlrecipes.plan.plan import Plan
    from rlrecipes.plan.timing import TimeEstimate


def plan_arguments(parser: argparse.ArgumentParser) -> None:
    recipe_arguments(parser)
    parser.add_argument("--json", action="store_true", help="machine-readable plan")
    parser.add_argument("--memory", action="store_true", help="include the per-GPU memory breakdown")
    parser.add_argument("--force", action="store_true",
                        help="print the plan even when its memory estimate exceeds the GPU (exit 0)")


def plan(args) -> int:
    from rlrecipes.plan.plan import build_plan, key_problems

    run = resolve_recipe(args)
    problems = key_problems(run)
    if problems:
        # the first one, named where it was set; validate would stop at the same key (Hydra applies in order)
        first, rest = problems[0], [p.key for p in problems[1:]]
        raise RecipeError(first.message + (f" (and {len(rest)} more: {', '.join(rest)})" if rest else ""),
                          where=run.sources.get(first.override.lstrip("+~"), "overrides"),
                          hint=f"did you mean {', '.join(first.suggestions)}?" if first.suggestions else
                          f"`rlrecipes validate {run.name}` checks against verl {run.image.verl} itself")
    result = build_plan(run)
    mem = result.memory
    if mem.known and mem.total_gib > mem.gpu_memory_gib and not args.force:
        raise RecipeError(
            f"needs ~{mem.total_gib:.1f} GiB per GPU at its peak ({mem.peak_phase}), but "
            f"{result.hardware.gpu} has {mem.gpu_memory_gib:g} GiB",
            where=f"{run.name} on {run.profile.name}",
            hint="pick a profile with more GPU memory, lower batch sizes or lengths (rlrecipes plan --memory --force "
                 "shows the terms), or pass --force to print the plan anyway")
    if args.json:
        json.dump(result.as_dict(), sys.stdout, indent=2)
        print()
        return 0
    _print_plan(result, show_memory=args.memory)
    return 0


def _print_plan(p: Plan, show_memory: bool) -> None:
    from rich.table import Table

    from rlrecipes import ui
    from rlrecipes.fsutil import human_bytes

    # the terminal's width (80 when piped): rich wraps the values at word boundaries; a word longer than its
    # column (a path in a narrow terminal) is folded rather than cut
    console = ui.console()
    hw, b, s, c = p.hardware, p.batch, p.schedule, p.checkpoints
    table = Table(title=f"plan: {p.recipe} on {p.profile}", show_header=False, title_justify="left")
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    table.add_row("image", f"{p.image.tag}  ({p.image.dockerfile})")
    table.add_row("hardware", f"{hw.nnodes} node(s) x {hw.gpus_per_node} x {hw.gpu} "
                              f"({hw.gpu_memory_gib:g} GiB) = {hw.gpus} GPU(s); {hw.dtype}, "
                              f"{hw.attention}, rollout {hw.rollout} TP {hw.tensor_parallel}")
    algo = p.algorithm
    table.add_row("algorithm", f"{algo.adv_estimator}; critic: {'yes' if algo.critic else 'no'}; "
                               f"reference: {'yes' if algo.reference_policy else 'no'}; "
                               f"LoRA rank: {algo.lora_rank or 'off'}")
    table.add_row("per step", f"{b.prompts_per_step} prompts x {b.responses_per_prompt} = "
                              f"{b.responses_per_step} responses (<= {b.max_tokens_per_response} tokens each)")
    table.add_row("updates", f"mini batch {b.ppo_mini_batch_prompts} prompts -> "
                             f"{b.optimizer_steps_per_step} optimizer step(s) per step; "
                             f"{b.responses_per_gpu_per_mini_batch} responses/GPU/mini batch, micro "
                             f"{b.micro_batch_per_gpu} -> {b.gradient_accumulation} accumulation steps")
    table.add_row("schedule", f"{s.train_rows} train rows ({s.train_rows_source}) -> {s.describe()}; "
                              f"validation every {s.test_freq} steps ({s.validations} in all)")
    saves = c.save_steps
    shown = ", ".join(map(str, saves[:8])) + (" ..." if len(saves) > 8 else "")
    table.add_row("checkpoints", f"every {c.save_freq} steps at [{shown}] into {c.dir}; keep last "
                                 f"{c.keep_last}; resume {c.resume_mode}")
    table.add_row("disk", f"{human_bytes(c.bytes_per_checkpoint)} per checkpoint; "
                          f"{human_bytes(c.disk_needed_bytes)} for {c.disk_note}")
    if p.memory.known:
        table.add_row("GPU memory", f"~{_size(p.memory.total_gib, 1)} per GPU of {hw.gpu_memory_gib:g} GiB "
                                    "(rlrecipes plan --memory for the terms)")
    else:
        table.add_row("GPU memory", "not estimated: " + "; ".join(p.memory.notes))
    if p.memory_measured:
        m = p.memory_measured
        parts = "; ".join(f"{what}: {got:g} GiB (estimate {est:g})" for what, got, est, _ in m.phases)
        table.add_row("GPU memory, measured", f"at {m.settings}: {parts}; {m.measured_on} (record: {m.source})")
    if p.time:
        for label, text in time_rows(p.time, s.total_steps):
            table.add_row(label, text)
    else:
        table.add_row("time (estimate)", "none: no throughput measured for this recipe's model on this profile")
    table.add_row("loggers", f"{p.loggers} -> {p.logs}")
    table.add_row("launch", p.launch)
    console.print(table)
    if show_memory and p.memory.known:
        mt = Table(title=f"per-GPU memory estimate at its peak ({p.memory.peak_phase})", title_justify="left")
        mt.add_column("term", overflow="fold")
        mt.add_column("size", justify="right", no_wrap=True)
        for term in p.memory.terms:
            mt.add_row(term.name, _size(term.gib))
        console.print(mt)
    for warning in p.warnings:
        console.print(f"[yellow]warning:[/] {warning}")
    console.print("[bold]command:[/]")
    from rlrecipes.recipe.overrides import shell_word

    head, overrides = p.command[:3], p.command[3:]
    print(" \\\n    ".join([" ".join(head)] + [shell_word(o) for o in overrides]))


def _duration(seconds: float, upper: float | None = None) -> str:
    """'9.9 h', '5.5 min', or a range in the upper end's unit: '5.5-6.9 min'."""
    top = seconds if upper is None else upper
    unit, size = ("h", 3600) if top >= 3600 else ("min", 60)
    return f"{seconds / size:.1f}{'' if upper is None else f'-{upper / size:.1f}'} {unit}"


def time_rows(t: TimeEstimate, total_steps: int | None) -> list[tuple[str, str]]:
    """The time range, where each figure comes from, and the recorded run's phases, as (label, text) rows."""
    high, low, top = t.seconds_per_step, t.low_seconds_per_step, t.max_response_length
    if low is not None and low < high:
        per_step = (f"{low:.1f}-{high:.1f} s/step (responses at the recorded run's mean length, "
                    f"{t.recorded_mean_length:.0f} tokens, .. at the maximum, {top})")
    elif low is not None:
        per_step = (f"~{high:.1f} s/step at the maximum length, {top} tokens (the recorded run's mean, "
                    f"{t.recorded_mean_length:.0f}, is not shorter: no lower figure)")
    else:
        per_step = (f"~{high:.1f} s/step at the maximum length, {top} tokens (the recorded run's mean length "
                    "is not recorded: no lower figure)")
    parts = [per_step]
    if t.validations:
        parts.append(f"{t.validations} validation(s) x {t.validation_seconds:.1f} s" if t.validation_seconds
                     is not None else f"{t.validations} validation(s): time not recorded")
    if t.saves:
        parts.append(f"{t.saves} checkpoint save(s) x {t.save_seconds:.2f} s" if t.save_seconds is not None
                     else f"{t.saves} checkpoint save(s): time not recorded")
    parts.append("start-up " + t.startup)
    if t.high_total_seconds is None:
        total = "total unknown (no step count)"
    elif t.low_total_seconds is not None and t.low_total_seconds < t.high_total_seconds:
        total = f"{_duration(t.low_total_seconds, t.high_total_seconds)} for {total_steps} steps"
    else:
        total = f"~{_duration(t.high_total_seconds)} for {total_steps} steps"
    rows = [("time (estimate)", f"{total}: " + "; ".join(parts) + f" -- {t.covers}")]
    where = (f"measured on this profile's GPU model ({t.gpu})" if t.same_gpu else
             f"measured on {t.gpu}, not this profile's GPU ({t.profile_gpu}): not scaled to it, a run there "
             "may take longer or shorter")
    origin = f"{where}; " + (f"{t.scaled}" if t.scaled else "at the measured settings, not scaled")
    if t.validation_seconds is not None or t.save_seconds is not None:
        origin += "; validation and saves as the recorded run timed them, at its settings"
    origin += f"; from {t.measured_on} (record: {t.source})"
    poll, recorded = t.generation_poll_s, t.recorded_poll_s
    if poll is not None:
        origin += (f"; verl's replay buffer polls every {poll:g} s, so each generation and validation ends on a "
                   f"poll: the same work a fraction of a second slower or faster on another host can take "
                   f"{poll:g} s more or less a step (docs/bench/gpu-overhead.md)")
        if recorded is not None and poll < recorded:
            origin += (f"; the record was timed polling every {recorded:g} s, so this run's generations may "
                       f"each end up to {recorded - poll:g} s sooner than the figures above")
    if t.hosts:
        steps = [h["seconds_per_step"] for h in t.hosts]
        gpus = sorted({h["gpu"] for h in t.hosts})
        took = f"{min(steps):.2f}" if len(steps) == 1 else f"{min(steps):.2f}-{max(steps):.2f}"
        origin += (f"; on other hosts the same recipe and profile took {took} s/step "
                   f"({len(steps)} run(s), one host each: {', '.join(gpus)}; `plan --json`, time.hosts): a step's "
                   "time is the host's as much as the settings' (docs/bench/gpu-overhead.md)")
    rows.append(("time, measured", origin))
    if t.phases or t.mfu:
        shown = ", ".join(f"{name} {v['median_s']:.2f}" for name, v in t.phases.items())
        mfu = ", ".join(f"{key.removeprefix('perf/mfu/')} {v['median']:.3f}" for key, v in t.mfu.items())
        rows.append(("time, phases", f"median s as recorded, not scaled: {shown or 'none logged'}; MFU "
                                     f"{mfu or 'not logged'} (the recorded run's metrics file: `plan --json`, "
                                     "time.record)"))
    else:
        rows.append(("time, phases", t.record))
    return rows


def _size(gib: float, decimals: int = 2) -> str:
    """GiB from 1 GiB up; below, MiB (a tiny model's figures are MiB, not "0.0 GiB")."""
    return f"{gib:.{decimals}f} GiB" if gib >= 1 else f"{gib * 1024:.{decimals - 1}f} MiB"

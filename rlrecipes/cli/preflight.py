"""`rlrecipes preflight RECIPE`: every predictable failure of a launch, in seconds, with its fix."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rlrecipes.cli.arguments import recipe_arguments, resolve_recipe
from rlrecipes.errors import EXIT_FAILED, EXIT_OK


def preflight_arguments(parser: argparse.ArgumentParser) -> None:
    from rlrecipes.preflight.checks import CHECK_NAMES

    recipe_arguments(parser)
    parser.add_argument("--gpu-inventory", type=Path, metavar="FILE.json",
                        help="plan against these GPUs instead of the detected ones, e.g. "
                             '{"gpus": [{"name": "Tesla P40", "memory_mib": 24576, "compute_capability": "6.1"}], '
                             '"driver_version": "535.183.01"}; host checks still read this host')
    parser.add_argument("--json", action="store_true",
                        help='print {"checks": [{"check", "status", "message", "fix"}, ...]} (plus inventory, memory)')
    parser.add_argument("--only", action="append", choices=CHECK_NAMES, metavar="CHECK",
                        help=f"run only these checks (repeatable): {', '.join(CHECK_NAMES)}")
    parser.add_argument("--memory", action="store_true", help="also print the per-GPU memory estimate by phase")
    parser.add_argument("--shm", default="/dev/shm", metavar="PATH", help="shared-memory mount to measure (/dev/shm)")
    parser.add_argument("--env-file", type=Path, metavar="FILE",
                        help="write KEY=VALUE lines the launch must export (WANDB_MODE=offline when wandb has no "
                             "credentials); empty when nothing is needed")


def preflight(args) -> int:
    from rlrecipes.fsutil import atomic_write_text
    from rlrecipes.preflight.checks import FAIL, Context, offline_env, run_checks
    from rlrecipes.preflight.host import gather_host_facts
    from rlrecipes.preflight.inventory import detect_inventory, load_inventory

    run = resolve_recipe(args)
    inventory = load_inventory(args.gpu_inventory) if args.gpu_inventory else detect_inventory()
    train = run.get("data.train_files")
    paths = [run.ckpt_dir, run.model_path, *(train if isinstance(train, list) else [train])]
    host = gather_host_facts([str(p) for p in paths], shm_path=args.shm, ckpt_root=run.ckpt_dir)
    ctx = Context(run, inventory, host)
    checks = run_checks(run, inventory, host, only=args.only, context=ctx)
    env = offline_env(ctx, checks)
    if args.env_file:
        atomic_write_text(args.env_file, "".join(f"{k}={v}\n" for k, v in env.items()))
    failed = any(c.status == FAIL for c in checks)
    if args.json:
        memory = ctx.estimate.as_dict() if "estimate" in ctx._cache or args.memory else None
        json.dump({"recipe": run.name, "profile": run.profile.name, "ok": not failed,
                   "checks": [c.as_dict() for c in checks], "env": env, "inventory": inventory.as_dict(),
                   "memory": memory, "warnings": run.warnings}, sys.stdout, indent=2)
        print()
    else:
        _print(run, inventory, checks, ctx if args.memory else None, env)
    return EXIT_FAILED if failed else EXIT_OK


def _print(run, inventory, checks, ctx, env) -> None:
    from rich.markup import escape
    from rich.table import Table

    from rlrecipes import ui

    # the terminal's width (80 when piped). Status and name share a column and the fix sits under its message,
    # so the text has one wide column that rich wraps at word boundaries (a word longer than it, a path in a
    # narrow terminal, is folded)
    console = ui.console()
    style = {"pass": "[green]pass[/]", "warn": "[yellow]warn[/]", "fail": "[bold red]FAIL[/]"}
    source = inventory.source if inventory.gpus else "no GPU detected"
    table = Table(title=f"preflight: {run.name} on {run.profile.name} ({source})", title_justify="left")
    table.add_column("check", no_wrap=True)
    table.add_column("message (and the fix)", overflow="fold")
    for c in checks:
        fix = f"\n[bold]fix:[/] {escape(c.fix)}" if c.fix and c.status != "pass" else ""
        table.add_row(f"{style[c.status]} [bold]{c.name}[/]", escape(c.message) + fix)
    console.print(table)
    for warning in run.warnings:
        console.print(f"[yellow]warning:[/] {warning}")
    if ctx is not None:
        est = ctx.estimate
        mt = Table(title=f"per-GPU memory estimate on {est.gpu_memory_gib:.0f} GiB (GiB)", title_justify="left")
        mt.add_column("phase", no_wrap=True)
        mt.add_column("total", justify="right", no_wrap=True)
        mt.add_column("terms, biggest first", overflow="fold")
        for phase, terms in est.phases.items():
            mark = " (peak)" if phase == est.peak_phase else ""
            shown = sorted((t for t in terms if t.bytes > 0), key=lambda t: -t.bytes)
            mt.add_row(phase + mark, f"{est.phase_gib(phase):.1f}", "; ".join(f"{t.name} {t.gib:.2f}" for t in shown))
        console.print(mt)
        for note in est.notes:
            console.print(f"  note: {note}")
    for key, value in env.items():
        console.print(f"launch environment: {key}={value}")
    counts = {s: sum(1 for c in checks if c.status == s) for s in ("pass", "warn", "fail")}
    verdict = "[bold red]FAILED[/]" if counts["fail"] else "[green]ok[/]"
    console.print(f"{verdict}: {counts['pass']} passed, {counts['warn']} warnings, {counts['fail']} failed")

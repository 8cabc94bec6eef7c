"""CLI of the recipe engine: validate, plan, render, launchers, recipes."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rlrecipes.errors import EXIT_INVALID, RecipeError

if TYPE_CHECKING:
    from rlrecipes.plan.plan import Plan


def recipe_arguments(parser: argparse.ArgumentParser, recipe_required: bool = True) -> None:
    parser.add_argument("recipe", nargs=None if recipe_required else "?",
                        help="recipe name: its path under recipes/ without .yaml (see `rlrecipes recipes`)")
    parser.add_argument("--profile", "-p", help="hardware profile (default: the recipe's own)")
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="Hydra-style verl overrides, e.g. trainer.total_epochs=15")


def _resolve(args):
    from rlrecipes.recipe.load import resolve

    return resolve(args.recipe, profile=args.profile, overrides=args.overrides)


# ------------------------------------------------------------------------------------ validate
def validate_arguments(parser: argparse.ArgumentParser) -> None:
    recipe_arguments(parser, recipe_required=False)
    parser.add_argument("--all", action="store_true",
                        help="validate every shipped recipe on every profile it lists")
    parser.add_argument("--json", action="store_true", help="machine-readable result")


def validate(args) -> int:
    from rlrecipes.recipe.load import list_recipes, load_recipe, resolve
    from rlrecipes.recipe.validate import validate_runs

    if args.all:
        runs = [resolve(name, profile=p) for name in list_recipes() for p in load_recipe(name).profiles]
    elif args.recipe:
        runs = [_resolve(args)]
    else:
        raise RecipeError("name a recipe or pass --all", hint="rlrecipes recipes  # lists them")
    results = validate_runs(runs)
    if args.json:
        json.dump([{"recipe": r.run.name, "profile": r.run.profile.name, "verl": r.verl, "ok": r.ok,
                    "kind": r.kind, "key": r.key, "message": r.message, "suggestions": r.suggestions}
                   for r in results], sys.stdout, indent=2)
        print()
    else:
        for result in results:
            for warning in result.run.warnings:
                print(f"warn  {result.run.name}: {warning}", file=sys.stderr)
            print(result.describe())
    return 0 if all(r.ok for r in results) else EXIT_INVALID


# ---------------------------------------------------------------------------------------- plan
def plan_arguments(parser: argparse.ArgumentParser) -> None:
    recipe_arguments(parser)
    parser.add_argument("--json", action="store_true", help="machine-readable plan")
    parser.add_argument("--memory", action="store_true", help="include the per-GPU memory breakdown")
    parser.add_argument("--force", action="store_true",
                        help="print the plan even when its memory estimate exceeds the GPU (exit 0)")


def plan(args) -> int:
    from rlrecipes.plan.plan import build_plan, key_problems

    run = _resolve(args)
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
    from rich.console import Console
    from rich.table import Table

    from rlrecipes.fsutil import human_bytes

    console = Console(width=max(100, Console().width))
    hw, b, s, c = p.hardware, p.batch, p.schedule, p.checkpoints
    table = Table(title=f"plan: {p.recipe} on {p.profile}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
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
    table.add_row("schedule", f"{s.train_rows} train rows ({s.train_rows_source}) -> "
                              f"{s.steps_per_epoch} steps/epoch x {s.epochs} epochs = {s.total_steps} steps; "
                              f"validation every {s.test_freq} steps")
    saves = c.save_steps
    shown = ", ".join(map(str, saves[:8])) + (" ..." if len(saves) > 8 else "")
    table.add_row("checkpoints", f"every {c.save_freq} steps at [{shown}] into {c.dir}; keep last "
                                 f"{c.keep_last}; resume {c.resume_mode}")
    table.add_row("disk", f"{human_bytes(c.bytes_per_checkpoint)} per checkpoint; "
                          f"{human_bytes(c.disk_needed_bytes)} for {c.disk_note}")
    mem = p.memory.as_dict()
    table.add_row("GPU memory", f"~{mem.get('total_gib', 0):.1f} GiB per GPU of "
                                f"{hw.gpu_memory_gib:g} GiB (rlrecipes plan --memory for the terms)")
    if p.memory_measured:
        m = p.memory_measured
        parts = "; ".join(f"{what}: {got:g} GiB (estimate {est:g})" for what, got, est, _ in m.phases)
        table.add_row("GPU memory, measured", f"at {m.settings}: {parts}; {m.measured_on} (record: {m.source})")
    time = p.time
    if time:
        total = f"{time.total_seconds / 3600:.1f} h for {s.total_steps} steps" if time.total_seconds else \
            "total unknown (no step count)"
        table.add_row("time (estimate)", f"~{time.seconds_per_step:.0f} s/step, {total} -- {time.covers}; "
                                         f"from {time.measured_on} (record: {time.source})")
    else:
        table.add_row("time (estimate)", "none: no throughput measured for this recipe's model on this profile")
    table.add_row("loggers", f"{p.loggers} -> {p.logs}")
    table.add_row("launch", p.launch)
    console.print(table)
    if show_memory:
        mt = Table(title="per-GPU memory estimate", title_justify="left")
        mt.add_column("term")
        mt.add_column("GiB", justify="right")
        for term in mem.get("terms", []):
            mt.add_row(term["name"], f"{term['gib']:.2f}")
        console.print(mt)
    for warning in p.warnings:
        console.print(f"[yellow]warning:[/] {warning}")
    console.print("[bold]command:[/]")
    from rlrecipes.recipe.overrides import shell_word

    head, overrides = p.command[:3], p.command[3:]
    print(" \\\n    ".join([" ".join(head)] + [shell_word(o) for o in overrides]))


# -------------------------------------------------------------------------------------- render
def render_arguments(parser: argparse.ArgumentParser) -> None:
    recipe_arguments(parser)
    parser.add_argument("--out", required=True, type=Path, help="run directory to write")
    parser.add_argument("--force", action="store_true",
                        help="overwrite config.yaml, train.sh and manifest.json if --out already has them")
    parser.add_argument("--no-validate", action="store_true",
                        help="skip validation against verl (config.yaml then holds the overrides only)")


def render(args) -> int:
    from rlrecipes.recipe.render import check_run_dir, render_run_dir
    from rlrecipes.recipe.validate import validate_runs

    run = _resolve(args)
    check_run_dir(args.out, args.force)  # before the validation's seconds
    config = None
    if not args.no_validate:
        (result,) = validate_runs([run])
        if not result.ok:
            print(result.describe(), file=sys.stderr)
            return EXIT_INVALID
        config = result.config
    for path in render_run_dir(run, args.out, args.overrides, config, force=args.force):
        print(f"wrote {path}")
    return 0


# ----------------------------------------------------------------------------------- launchers
def launchers_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true", help="exit 1 if any launcher is missing or stale")


def launchers(args) -> int:
    from rlrecipes.fsutil import atomic_write_text
    from rlrecipes.paths import recipes_dir, repo_root
    from rlrecipes.recipe.load import list_recipes, resolve
    from rlrecipes.recipe.render import launcher_path, launcher_text

    # Launchers are environment-independent: render them with the documented defaults.
    env = {"WANDB_API_KEY": ""}
    stale = []
    for name in list_recipes():
        run = resolve(name, env=env)
        path = launcher_path(run)
        text = launcher_text(run)
        current = path.read_text() if path.exists() else None
        if current == text:
            continue
        rel = path.relative_to(repo_root())
        if args.check:
            stale.append(str(rel))
        else:
            atomic_write_text(path, text, mode=0o755)
            print(f"wrote {rel}")
    expected = {launcher_path(resolve(n, env=env)) for n in list_recipes()}
    orphans = sorted(set(recipes_dir().rglob("*.sh")) - expected)
    if args.check:
        problems = [f"stale or missing: {s}" for s in stale] + [f"no recipe for: {o}" for o in orphans]
        for line in problems:
            print(line, file=sys.stderr)
        if problems:
            print("run `make launchers` (rlrecipes launchers) and commit the result", file=sys.stderr)
            return 1
        print(f"launchers up to date ({len(expected)})")
    return 0


# ------------------------------------------------------------------------------------- recipes
def list_recipes_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true",
                        help="machine-readable: {recipes: [{name, description, path, profiles}], profiles: [...]}")


def list_recipes(args) -> int:
    import json

    from rlrecipes.paths import repo_root
    from rlrecipes.recipe.load import list_profiles, list_recipes as names, load_profile, load_recipe

    recipes = [load_recipe(name) for name in names()]
    profiles = [load_profile(name) for name in list_profiles()]
    if args.json:
        def rel(path) -> str:
            return path.relative_to(repo_root()).as_posix() if path.is_relative_to(repo_root()) else str(path)

        print(json.dumps({
            "recipes": [{"name": r.name, "description": r.description, "path": rel(r.path), "profile": r.profile,
                         "profiles": list(r.profiles)} for r in recipes],
            "profiles": [{"name": p.name, "description": p.description, "path": rel(p.path), "image": p.image_name,
                          "verl": p.image.verl, "gpus": p.n_gpus, "gpu": p.gpu.name} for p in profiles],
        }, indent=2))
        return 0
    print("recipes (recipes/<name>.yaml):")
    for recipe in recipes:
        print(f"  {recipe.name:34s} {recipe.description}  [profiles: {', '.join(recipe.profiles)}]")
    print("profiles (recipes/profiles/<name>.yaml):")
    for profile in profiles:
        print(f"  {profile.name:34s} {profile.description}  [image {profile.image_name}, verl {profile.image.verl}]")
    return 0

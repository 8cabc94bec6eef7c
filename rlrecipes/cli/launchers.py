"""`rlrecipes launchers [--check]`: recipes/*.sh regenerated from the YAML recipes."""

from __future__ import annotations

import argparse
import sys


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
    expected = set()
    for name in list_recipes():
        run = resolve(name, env=env)
        path = launcher_path(run)
        expected.add(path)
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

"""Reading a verdict as `rlrecipes expect --json` writes it."""

from __future__ import annotations


def by_name(checks: list[dict]) -> dict[str, tuple[str, str]]:
    """Each check's (status, value) by its name's words before any parenthesis or profile: "s/step on
    any-1gpu-hopper (steady state: ...)" -> "s/step"."""
    return {c["name"].split(" (")[0].split(" on ")[0]: (c["status"], c["value"]) for c in checks}


def readings(checks: list[dict], moved: tuple[str, ...] = ()) -> dict[str, str]:
    """Each check's value by `by_name`'s name, leaving out the checks in `moved`: those whose statistic the contract
    changed after the verdict was recorded (a recorded verdict keeps the contract of its day)."""
    return {name: value for name, (_, value) in by_name(checks).items() if name not in moved}


def judged(capsys, run, recipe: str, *extra: str, profile: str = "any-1gpu-hopper") -> tuple[int, dict]:
    """`rlrecipes expect RUN --recipe RECIPE --profile PROFILE --json EXTRA...` as a user runs it on a recorded run's
    log folder: its exit code and the verdict it printed."""
    import json

    from rlrecipes.cli import main

    code = main(["expect", str(run), "--recipe", recipe, "--profile", profile, "--json", *extra])
    return code, json.loads(capsys.readouterr().out)

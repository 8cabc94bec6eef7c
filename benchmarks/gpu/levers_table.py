"""The launches of one `benchmarks/gpu/startup_levers.sh` sitting as the Markdown table docs/bench/gpu-overhead.md
shows for it (tests/report/test_levers_record.py checks that the two agree):

    .venvs/dev/bin/python benchmarks/gpu/levers_table.py [--phases] docs/bench/gpu-data/startup-levers-h100-2

One row a lever folder under SITTING/levers/ (its console log and metrics file, as the script copies them), in
the order the levers ran: the start-up phases (rlrecipes/verl/startup.py: ray, datasets, models, rollout) and
launch to "ready to fit"; step 1's time and the part of it no phase timer of verl covers; the range of the later
steps' times and of their generation (verl's `timing_s/step`, `timing_s/gen`, read with the project's metrics
reader). A lever cut short shows "-" for what it did not reach. `--phases`: one row a lever with the range of each
of verl's phase timers over the steps after the first (what a step lever changes).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from rlrecipes.verl.run_metrics import read_jsonl  # noqa: E402
from rlrecipes.verl.startup import read_startup  # noqa: E402

PHASES = ("ray", "datasets", "models", "rollout")


def label(lever: str, before: list[str]) -> str:
    """What the row's name adds, from the launches before it on the host: the host's first launch (whatever the lever:
    cold page cache, empty compile caches), and `shipped-warm` as the same command again when `shipped-cold`
    ran just before it, as shipped on the warm host otherwise."""
    if not before:
        return ", the host's first"
    if lever == "shipped-warm":
        return ", the same command again" if before[-1] == "shipped-cold" else ", as shipped, on the warm host"
    return ""


def timings(folder: Path) -> dict[int, dict[str, float]]:
    """Each logged step's `timing_s/*` seconds, by step number ({} without a metrics file)."""
    metrics = sorted(folder.glob("metrics-*.jsonl"))
    if not metrics:
        return {}
    return {n: {k.removeprefix("timing_s/"): v for k, v in data.items() if k.startswith("timing_s/")}
            for n, data in read_jsonl(metrics[0]).steps.items()}


def outside_timers(step: dict[str, float]) -> float:
    """A step's seconds that none of verl's phase timers covers."""
    return step["step"] - sum(v for k, v in step.items() if k != "step")


def _span(values: list[float], digits: int = 1, unit: str = " s") -> str:
    """min-max of `values` ("-" for none); the phase table gives hundredths of a second and no unit (a phase of the
    canary's step is a fraction of one)."""
    return f"{min(values):.{digits}f}-{max(values):.{digits}f}{unit}" if values else "-"


def _later(last: int) -> str:
    """The steps after the first, up to the last one logged, as the column headers name them."""
    return f"steps 2-{last}" if last > 2 else "step 2"


def row(folder: Path, before: list[str] | None = None) -> tuple[str, int]:
    """(the lever's Markdown row, the last step it logged); `before`: the levers that ran before it on the host (its
    place unnamed when not given)."""
    logs = sorted(folder.glob("console-*.log"))
    startup = read_startup(logs[0]) if logs else None
    seconds = {p.key: p.seconds for p in startup.phases} if startup else {}
    steps = timings(folder)
    later = [steps[n] for n in sorted(steps) if n > 1]
    first = steps.get(1)
    cells = [f"{seconds[key]:.0f}" if key in seconds else "-" for key in PHASES]
    cells.append(f"{startup.total_s:.0f} s" if startup and startup.complete else "-")
    cells += [f"{first['step']:.1f} s", f"{outside_timers(first):.1f} s"] if first else ["-", "-"]
    cells += [_span([s["step"] for s in later]), _span([s["gen"] for s in later if "gen" in s])]
    name = f"`{folder.name}`" + (label(folder.name, before) if before is not None else "")
    return f"| {name} | " + " | ".join(cells) + " |", max(steps, default=0)


def _in_order(sitting: Path) -> list[Path]:
    """The sitting's lever folders in the order they ran: the launcher stamps each console log's name with its
    launch time."""
    folders = [f for f in (sitting / "levers").iterdir() if f.is_dir()]
    folders.sort(key=lambda f: min((p.name for p in f.glob("console-*.log")), default="~"))
    return folders


def table(sitting: Path) -> str:
    folders = _in_order(sitting)
    rows = [row(f, [g.name for g in folders[:i]]) for i, f in enumerate(folders)]
    later = _later(max((n for _, n in rows), default=0))
    lines = ["| launch | ray | datasets | models | rollout | launch to \"ready to fit\" | step 1 | "
             f"outside the timers in step 1 | {later} | generation in {later} |", "|---|" + "---|" * 9]
    return "\n".join(lines + [r for r, _ in rows]) + "\n"


# verl 0.9.1's phase timers of a step, in the order the step runs them, and their column names
STEP_PHASES = (("gen", "generation"), ("old_log_prob", "old log-probs"), ("ref", "reference"), ("adv", "advantages"),
               ("update_actor", "update"), ("update_weights", "weight sync"), ("step", "step"))


def phases_table(sitting: Path) -> str:
    """Each lever's phase timers over its steps after the first, as ranges of seconds."""
    folders = _in_order(sitting)
    steps = [timings(f) for f in folders]
    later = _later(max((max(s, default=0) for s in steps), default=0))
    lines = [f"| launch ({later}, seconds) | " + " | ".join(name for _, name in STEP_PHASES) + " |",
             "|---|" + "---|" * len(STEP_PHASES)]
    for folder, timed in zip(folders, steps):
        rows = [timed[n] for n in sorted(timed) if n > 1]
        cells = [_span([r[key] for r in rows if key in r], digits=2, unit="") for key, _ in STEP_PHASES]
        lines.append(f"| `{folder.name}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--phases"]
    if len(args) != 1 or not (Path(args[0]) / "levers").is_dir():
        sys.exit("usage: levers_table.py [--phases] SITTING (a folder holding levers/<lever>/ as startup_levers.sh "
                 "leaves it)")
    print((phases_table if "--phases" in sys.argv[1:] else table)(Path(args[0])), end="")

"""The launches of one `benchmarks/gpu/startup_levers.sh` sitting as the Markdown table docs/bench/gpu-overhead.md
shows for it (tests/report/test_levers_record.py checks that the two agree):

    .venvs/dev/bin/python benchmarks/gpu/levers_table.py docs/bench/gpu-data/startup-levers-h100-2

One row a lever folder under SITTING/levers/ (its console log and metrics file, as the script copies them), in
the order the levers ran: the start-up phases (rlrecipes/verl/startup.py: ray, datasets, models, rollout) and
launch to "ready to fit"; step 1's time and the part of it no phase timer of verl covers; the range of the later
steps' times and of their generation (verl's `timing_s/step`, `timing_s/gen`, read with the project's metrics
reader). A lever cut short shows "-" for what it did not reach.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from rlrecipes.verl.run_metrics import read_jsonl  # noqa: E402
from rlrecipes.verl.startup import read_startup  # noqa: E402

PHASES = ("ray", "datasets", "models", "rollout")
LABELS = {"shipped-cold": ", the host's first", "shipped-warm": ", the same command again"}


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


def _span(values: list[float]) -> str:
    return f"{min(values):.1f}-{max(values):.1f} s" if values else "-"


def row(folder: Path) -> tuple[str, int]:
    """(the lever's Markdown row, the last step it logged)."""
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
    lever = folder.name
    return f"| `{lever}`{LABELS.get(lever, '')} | " + " | ".join(cells) + " |", max(steps, default=0)


def table(sitting: Path) -> str:
    folders = [f for f in (sitting / "levers").iterdir() if f.is_dir()]
    # the order they ran: the launcher stamps each console log's name with its launch time
    folders.sort(key=lambda f: min((p.name for p in f.glob("console-*.log")), default="~"))
    rows = [row(f) for f in folders]
    last = max((n for _, n in rows), default=0)
    later = f"steps 2-{last}" if last > 2 else "step 2"
    lines = ["| launch | ray | datasets | models | rollout | launch to \"ready to fit\" | step 1 | outside the timers in "
             f"step 1 | {later} | generation in {later} |", "|---|" + "---|" * 9]
    return "\n".join(lines + [r for r, _ in rows]) + "\n"


if __name__ == "__main__":
    if len(sys.argv) != 2 or not (Path(sys.argv[1]) / "levers").is_dir():
        sys.exit("usage: levers_table.py SITTING (a folder holding levers/<lever>/ as startup_levers.sh leaves it)")
    print(table(Path(sys.argv[1])), end="")

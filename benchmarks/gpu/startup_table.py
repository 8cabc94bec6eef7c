"""The start-up of every launch recorded under docs/bench/gpu-data, phase by phase (rlrecipes.verl.startup), as
the Markdown table docs/bench/gpu-overhead.md shows (tests/report/test_startup.py checks that the two agree).

    .venvs/dev/bin/python benchmarks/gpu/startup_table.py [RECORDS_DIR]

Seconds from the line before: launch -> Ray -> verl's config and datasets -> actor and reference models ->
rollout engine and weight sync -> ready to fit. A launch whose verl prints only Ray's line (0.5.0) has one phase.
A log without the launcher's stamp in its name (the flagship's `verl-console.log.gz`, the smoke runs' numbered
logs) is timed from Ray on: its first column is "-", its last says "(from Ray)".
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from rlrecipes.verl.startup import MILESTONES, console_logs, read_startup  # noqa: E402


def table(records: Path) -> str:
    keys = [key for key, _, _ in MILESTONES]
    lines = ["| launch (console log under docs/bench/gpu-data/) | " + " | ".join(keys) + " | launch to the last |",
             "|---|" + "---|" * (len(keys) + 1)]
    for log in console_logs(records):
        startup = read_startup(log)
        if startup is None:
            continue
        seconds = {phase.key: phase.seconds for phase in startup.phases}
        cells = [f"{seconds[key]:.0f}" if key in seconds else "-" for key in keys]
        total = f"{startup.total_s:.0f}" + ("" if startup.from_launch else " (from Ray)")
        lines.append(f"| `{log.relative_to(records)}` | " + " | ".join(cells) + f" | {total} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(table(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "bench" / "gpu-data"), end="")

"""The start-up of every launch recorded under docs/bench/gpu-data, phase by phase (rlrecipes.verl.startup), as
the Markdown table docs/bench/gpu-overhead.md shows (tests/report/test_startup.py checks that the two agree).

    .venvs/dev/bin/python benchmarks/gpu/startup_table.py [RECORDS_DIR]
    .venvs/dev/bin/python benchmarks/gpu/startup_table.py --engines [RECORDS_DIR]

Seconds from the line before: launch -> Ray -> verl's config and datasets -> actor and reference models ->
rollout engine and weight sync -> ready to fit. A launch whose verl prints only Ray's line (0.5.0) has one phase.
A log without the launcher's stamp in its name (the flagship's `verl-console.log.gz`, the smoke runs' numbered
logs) is timed from Ray on: its first column is "-", its last says "(from Ray)".

With --engines: the vLLM engine's own start inside the rollout phase, for every launch that logged vLLM at INFO
(rlrecipes.verl.startup.EngineInit): the whole init, torch.compile's part of it, the CUDA-graph capture and the
weights' load, seconds as vLLM prints them ("-": no such line; no compilation part without torch.compile).
"""

from __future__ import annotations

import argparse
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


def engines_table(records: Path) -> str:
    lines = ["| launch (console log under docs/bench/gpu-data/) | engine init | of it torch.compile | CUDA graphs "
             "| weights |", "|---|---|---|---|---|"]

    def cell(value: float | None, digits: int) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    for log in console_logs(records):
        startup = read_startup(log)
        for engine in startup.engines if startup is not None else ():
            lines.append(f"| `{log.relative_to(records)}` | {cell(engine.init_s, 2)} | {cell(engine.compile_s, 2)} | "
                         f"{cell(engine.graphs_s, 0)} | {cell(engine.load_s, 2)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("records", nargs="?", type=Path, default=REPO / "docs" / "bench" / "gpu-data",
                        help="the folder of records to read (default: docs/bench/gpu-data)")
    parser.add_argument("--engines", action="store_true", help="the vLLM engines' own start instead")
    args = parser.parse_args(argv)
    if not args.records.is_dir():
        parser.error(f"{args.records}: not a folder of records")
    print((engines_table if args.engines else table)(args.records), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Every step's generation time on record, as whole 2-second polls plus what is left over: the evidence that verl
0.9.1's replay buffer, which polls TransferQueue every 2.0 s (rlrecipes/verl/replay_poll.py), sets the step's
generation time on the Hopper stack (docs/bench/gpu-overhead.md, "Generation waits for a 2-second poll").

    .venvs/dev/bin/python benchmarks/gpu/generation_ticks.py [--faster] [RECORDS_DIR]

Reads `timing_s/gen` from every metrics file under RECORDS_DIR (default docs/bench/gpu-data) with verl's
file-logger rows (`*metrics*.jsonl`), and prints one Markdown row a file: its steps, the range of the time,
how many steps took 1, 2, 3... whole polls (floor(gen / 2 s)), and the range of the remainder (gen - 2 s x polls).
A last row sums them up. Every such file on record is a Hopper-stack run (verl 0.9.1): the HF-rollout canaries of
verl 0.5.0 (`canary/`) kept console logs only. A launch that ran rlrecipes' PollReplayBuffer (its console log,
beside the metrics file under the same stamp, prints verl's config naming it) does not wait for 2-s polls: it is
left out of that table, and `--faster` prints those launches alone (steps, generation range).
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from rlrecipes.verl.run_metrics import read_jsonl  # noqa: E402
from rlrecipes.verl.startup import console_beside, open_log  # noqa: E402

POLL_S = 2.0  # verl 0.9.1's ReplayBuffer(poll_interval=2.0)


def generation_times(path: Path) -> list[float]:
    """`timing_s/gen` of each step of one file-logger metrics file, in step order (the project's one reader)."""
    steps = read_jsonl(path).steps
    return [steps[n]["timing_s/gen"] for n in sorted(steps) if "timing_s/gen" in steps[n]]


def split(seconds: float) -> tuple[int, float]:
    polls = math.floor(seconds / POLL_S)
    return polls, seconds - polls * POLL_S


def polled_faster(path: Path) -> bool:
    """Whether the launch that wrote this metrics file ran rlrecipes/verl/replay_poll.py's PollReplayBuffer: its
    console log (`console-STAMP.log` beside `metrics-STAMP.jsonl`, or kept gzipped) prints verl's config, the
    sampler's name in it."""
    console = console_beside(path)
    if console is None:
        return False
    with open_log(console, "rt") as f:
        return "'name': 'PollReplayBuffer'" in f.read()


def records(root: Path, faster: bool = False) -> dict[str, list[float]]:
    """Generation times by metrics file: the launches on verl's 2-s poll, or (`faster`) those on PollReplayBuffer."""
    found = {}
    for path in sorted(root.rglob("*metrics*.jsonl")):
        name = path.relative_to(root).as_posix()
        times = generation_times(path)
        if times and polled_faster(path) == faster:
            found[name] = times
    return found


def faster_table(root: Path) -> str:
    lines = ["| metrics file (under docs/bench/gpu-data/) | steps | generation | generation after step 1 |",
             "|---|---|---|---|"]
    for name, times in records(root, faster=True).items():
        later = times[1:] or times
        lines.append(f"| `{name}` | {len(times)} | {min(times):.2f}-{max(times):.2f} s | "
                     f"{min(later):.2f}-{max(later):.2f} s |")
    return "\n".join(lines) + "\n"


def table(root: Path) -> str:
    lines = ["| metrics file (under docs/bench/gpu-data/) | steps | generation | whole 2-s polls: steps | remainder |",
             "|---|---|---|---|---|"]
    every = []
    for name, times in records(root).items():
        parts = [split(t) for t in times]
        counts = Counter(p for p, _ in parts)
        rest = [r for _, r in parts]
        every += times
        lines.append(f"| `{name}` | {len(times)} | {min(times):.2f}-{max(times):.2f} s | "
                     + ", ".join(f"{p}: {counts[p]}" for p in sorted(counts))
                     + f" | {min(rest):.2f}-{max(rest):.2f} s |")
    rest = [split(t)[1] for t in every]
    lines.append(f"| all | {len(every)} | {min(every):.2f}-{max(every):.2f} s | - | "
                 f"{min(rest):.2f}-{max(rest):.2f} s |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    args = sys.argv[1:]
    faster = "--faster" in args
    args = [a for a in args if a != "--faster"]
    root = Path(args[0]) if args else REPO / "docs" / "bench" / "gpu-data"
    if not records(root, faster):
        sys.exit(f"generation_ticks: no metrics file with timing_s/gen under {root}"
                 + (" from a PollReplayBuffer launch" if faster else ""))
    print(faster_table(root) if faster else table(root), end="")

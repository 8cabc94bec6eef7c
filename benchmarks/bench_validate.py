"""Benchmark: wall time of `rlrecipes validate RECIPE` (end to end: CLI start, recipe resolution, one
verl subprocess that composes with Hydra and runs verl's validation). Target: < 10 s per recipe on the
CI machine (2 cores) once `make envs` has built the verl environments.

    .venvs/dev/bin/python benchmarks/bench_validate.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = [("qwen2.5-3b-gsm8k-grpo-lora", "a100-80gb", "0.8.0"), ("qwen2.5-0.5b-gsm8k-ppo", "p40-24gb", "0.5.0"),
         ("smoke-grpo-lora", "any-1gpu", "0.5.0")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    worst = 0.0
    for recipe, profile, verl in CASES:
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "rlrecipes", "validate", recipe, "--profile", profile],
                                  capture_output=True, text=True, cwd=REPO)
            times.append(time.perf_counter() - start)
            if proc.returncode != 0:
                print(proc.stdout, proc.stderr, file=sys.stderr)
                return 1
        median = statistics.median(times)
        worst = max(worst, median)
        print(f"validate {recipe:30s} {profile:10s} verl {verl}: median {median:.2f} s "
              f"(min {min(times):.2f}, max {max(times):.2f}, n={len(times)})")
    print(f"RESULT validate worst median {worst:.2f} s (target < 10 s): {'PASS' if worst < 10 else 'FAIL'}")
    return 0 if worst < 10 else 1


if __name__ == "__main__":
    raise SystemExit(main())

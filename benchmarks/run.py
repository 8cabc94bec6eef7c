"""Run every benchmarks/bench_*.py in its own process (`make bench`) and print each one's figures.

    .venvs/dev/bin/python benchmarks/run.py [-k PATTERN] [--list]

Each benchmark prints its own figures and targets; this runner only sequences them, times them and fails
(exit 1) if any benchmark exits non-zero, naming which.
"""

from __future__ import annotations

import argparse
import fnmatch
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def discover(pattern: str | None) -> list[Path]:
    benches = sorted(HERE.glob("bench_*.py"))
    if pattern:
        benches = [b for b in benches if fnmatch.fnmatch(b.stem, f"*{pattern}*")]
    return benches


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", dest="pattern", help="only benchmarks whose name contains PATTERN")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)

    benches = discover(args.pattern)
    if not benches:
        print(f"bench: no benchmarks/bench_*.py{' matching ' + args.pattern if args.pattern else ''}", file=sys.stderr)
        return 2
    if args.list:
        print("\n".join(b.name for b in benches))
        return 0
    results = []
    for bench in benches:
        print(f"==== {bench.name}", flush=True)
        start = time.monotonic()
        code = subprocess.run([sys.executable, str(bench)], cwd=HERE.parent).returncode
        results.append((bench.name, code, time.monotonic() - start))
    print("==== summary")
    for name, code, seconds in results:
        print(f"  {'ok    ' if code == 0 else 'FAILED'} {name:<28} {seconds:7.1f} s")
    failed = [name for name, code, _ in results if code != 0]
    if failed:
        print(f"bench: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""Join GPU memory samples (benchmarks/gpu/gpu_sampler.py) with verl's phase marks (RLRECIPES_PHASE_MARKS from
benchmarks/gpu/site) into per-phase figures: seconds, peak and mean GPU memory in use, mean utilisation.

    python3 benchmarks/gpu/phase_peaks.py MARKS.jsonl SAMPLES.jsonl [--out peaks.json]

A phase that runs several times (one per step) is reported per call and as its maximum. Nested phases
(`step` holds `gen`, `old_log_prob`, ...) are each reported on their own.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def phase_peaks(marks: list[dict], samples: list[dict]) -> dict:
    samples = sorted(samples, key=lambda s: s["t"])
    calls: dict[str, list[dict]] = defaultdict(list)
    for mark in sorted(marks, key=lambda m: m["t0"]):
        inside = [s for s in samples if mark["t0"] <= s["t"] <= mark["t1"]]
        calls[mark["phase"]].append({
            "seconds": round(mark["t1"] - mark["t0"], 3),
            "samples": len(inside),
            "peak_used_gib": round(max((s["used_mib"] for s in inside), default=0) / 1024, 2),
            "mean_used_gib": round(sum(s["used_mib"] for s in inside) / len(inside) / 1024, 2) if inside else None,
            "mean_util": round(sum(s["util"] for s in inside) / len(inside), 1) if inside else None,
        })
    return {phase: {"calls": rows, "peak_used_gib": max(r["peak_used_gib"] for r in rows),
                    "seconds": [r["seconds"] for r in rows]}
            for phase, rows in calls.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("marks", type=Path)
    parser.add_argument("samples", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    samples = read_jsonl(args.samples)
    result = {"overall_peak_used_gib": round(max((s["used_mib"] for s in samples), default=0) / 1024, 2),
              "phases": phase_peaks(read_jsonl(args.marks), samples)}
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    for phase, row in result["phases"].items():
        print(f"  {phase:<16} peak {row['peak_used_gib']:7.2f} GiB   s/call {row['seconds']}")
    print(f"  overall peak {result['overall_peak_used_gib']:.2f} GiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

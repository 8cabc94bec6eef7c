#!/usr/bin/env python3
"""Read Ray's timeline (`ray.timeline()`, which verl writes at the end of a run given
`ray_kwargs.timeline_json_file`): every remote call that ran, grouped by what was called, with how long it took
where it ran -- the whole call, and its three parts as Ray records them (arguments deserialized, the method
executed, its outputs stored).

    python3 benchmarks/gpu/ray_timeline.py TIMELINE.json[.gz] [--top N] [--json]

Beside a run's metrics log it splits a phase verl times on its driver (`timing_s/old_log_prob`, say) into the
seconds its worker call ran and the rest (dispatch, transfer, waiting): docs/bench/gpu-overhead.md.
"""
from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

PARTS = ("task:deserialize_arguments", "task:execute", "task:store_outputs")


def load(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        events = json.load(fh)
    if not isinstance(events, list):
        raise ValueError(f"{path}: not a Ray timeline (a JSON list of trace events)")
    return events


def calls(events: list[dict]) -> dict[str, list[dict]]:
    """Per called name (`Class.method` or a task's function), each call: its whole duration and its parts', in
    seconds. A part belongs to the call on the same worker whose interval holds it."""
    by_worker: dict[str, list[dict]] = defaultdict(list)
    parts: dict[str, list[dict]] = defaultdict(list)
    for ev in events:
        if ev.get("ph") != "X" or "dur" not in ev:
            continue
        cat = ev.get("cat", "")
        if cat.startswith("task::"):
            by_worker[ev["tid"]].append(ev)
        elif cat in PARTS:
            parts[ev["tid"]].append(ev)
    out: dict[str, list[dict]] = defaultdict(list)
    for tid, tasks in by_worker.items():
        tasks.sort(key=lambda e: e["ts"])
        pieces = sorted(parts.get(tid, []), key=lambda e: e["ts"])
        for task in tasks:
            start, end = task["ts"], task["ts"] + task["dur"]
            call = {"ts": start / 1e6, "total": task["dur"] / 1e6, "worker": tid}
            for piece in pieces:
                if start <= piece["ts"] and piece["ts"] + piece["dur"] <= end + 1:
                    call[piece["cat"].split(":")[-1]] = piece["dur"] / 1e6
            out[task["cat"][len("task::"):]].append(call)
    return dict(out)


def summary(grouped: dict[str, list[dict]]) -> list[dict]:
    rows = []
    for name, items in grouped.items():
        totals = [c["total"] for c in items]
        row = {"name": name, "calls": len(items), "workers": len({c["worker"] for c in items}),
               "sum_s": sum(totals), "median_s": statistics.median(totals), "max_s": max(totals)}
        for part in ("deserialize_arguments", "execute", "store_outputs"):
            values = [c[part] for c in items if part in c]
            row[f"{part}_median_s"] = statistics.median(values) if values else None
        rows.append(row)
    return sorted(rows, key=lambda r: -r["sum_s"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("timeline", type=Path)
    ap.add_argument("--top", type=int, default=25, help="rows to print (by total seconds)")
    ap.add_argument("--json", action="store_true", help="every row as JSON")
    args = ap.parse_args(argv)
    try:
        rows = summary(calls(load(args.timeline)))
    except (OSError, ValueError) as exc:
        print(f"ray_timeline.py: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0

    def fmt(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    print("| called | calls | workers | total s | median s | max s | deserialize | execute | store |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows[:args.top]:
        print(f"| `{r['name']}` | {r['calls']} | {r['workers']} | {r['sum_s']:.1f} | {fmt(r['median_s'])} | "
              f"{fmt(r['max_s'])} | {fmt(r['deserialize_arguments_median_s'])} | {fmt(r['execute_median_s'])} | "
              f"{fmt(r['store_outputs_median_s'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Read a torch profiler chrome trace as verl writes it (`global_profiler.tool=torch`: one `*.json.gz` a profiled
role and step under `global_profiler.save_path`): for each stage verl marks with `record_function` (its
`user_annotation` events: `actor_compute_log_prob`, `actor_update`, ...), the stage's wall time, the GPU kernel
time inside it, and the operators that fill it -- the outermost `cpu_op`s on the stage's thread, by name, with how
often and how long they ran; what is left of the wall time is Python between operators (or waiting outside torch),
and the stage's two longest stretches without an operator say where it lies (between which operators, how far in).

    python3 benchmarks/gpu/torch_trace.py TRACE.json.gz [--top N] [--json]
    python3 benchmarks/gpu/torch_trace.py TRACE.json.gz --slim OUT.json.gz

The question it answers for docs/bench/gpu-overhead.md: of a worker call's seconds (Ray's timeline gives those),
how much is GPU work and what runs on the CPU around it. Its last line, `window`: the seconds from the first
recorded operator to the last, and the top-level stages on the worker's main thread (the thread of the longest
stage marker) with where each starts: between them that thread ran no torch operator. A trace recorded with
Python's call stacks (verl's tool_config contents `stack`; startup_levers.sh's `profile-stack`) adds, for each of
those stages, the Python functions by self time (`python ...` lines): what the time between operators is.

`--slim OUT` writes the trace with only what this script reads -- the stage markers, each thread's outermost CPU
operators, the GPU activity without its arguments -- and prints its figures read back from it: a record small
enough to keep in the repository (a profiled canary step is ~4 MB gzipped, its slim copy ~0.7 MB). The figures
of every stage on the main thread are the full trace's; a marker nested inside an operator (FSDP's hooks during
the backward, on autograd's thread) loses the operators inside it.
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ray_timeline import read_json  # noqa: E402  # the same folder: one reader for the GPU host's JSON, gzipped or not


def load(path: Path) -> list[dict]:
    data = read_json(path)
    events = data.get("traceEvents") if isinstance(data, dict) else None
    if not isinstance(events, list):
        raise ValueError(f"{path}: not a chrome trace from torch's profiler (no traceEvents list)")
    return [e for e in events if e.get("ph") == "X" and "dur" in e]


# the trace's GPU activity: what a stage's "GPU kernels" sums, and what the slim copy keeps of the device side
GPU = ("kernel", "gpu_memcpy", "gpu_memset")


def _outermost(events: list[dict]) -> list[dict]:
    """Of CPU operators, those no other operator of the same thread encloses (sorted by start, longest first)."""
    outer, reach = [], {}
    for op in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
        thread = (op.get("pid"), op.get("tid"))
        if op["ts"] >= reach.get(thread, float("-inf")):
            outer.append(op)
            reach[thread] = op["ts"] + op["dur"]
    return outer


def _inside(event: dict, start: float, end: float) -> bool:
    return start <= event["ts"] and event["ts"] + event["dur"] <= end + 1


def stages(events: list[dict], top: int = 10) -> list[dict]:
    """One row a `user_annotation` (verl's stage marker): wall, kernel time inside, the outermost CPU ops."""
    marks = sorted((e for e in events if e.get("cat") == "user_annotation"), key=lambda e: e["ts"])
    kernels = [e for e in events if e.get("cat") in GPU]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    rows = []
    for mark in marks:
        start, end = mark["ts"], mark["ts"] + mark["dur"]
        mine = [o for o in ops if o.get("tid") == mark.get("tid") and o.get("pid") == mark.get("pid")
                and _inside(o, start, end)]
        by_name: dict[str, list[float]] = defaultdict(list)
        outer = _outermost(mine)
        for op in outer:
            by_name[op["name"]].append(op["dur"] / 1e6)
        gpu = sum(k["dur"] for k in kernels if _inside(k, start, end)) / 1e6
        named = sorted(by_name.items(), key=lambda item: -sum(item[1]))
        cpu = sum(sum(v) for v in by_name.values())
        rows.append({"stage": mark["name"], "wall_s": mark["dur"] / 1e6, "gpu_s": gpu, "cpu_ops_s": cpu,
                     "outside_ops_s": mark["dur"] / 1e6 - cpu,
                     "top": [{"op": name, "calls": len(v), "total_s": sum(v)} for name, v in named[:top]],
                     "gaps": _gaps(outer, start, end)})
    return rows


def _gaps(outer: list[dict], start: float, end: float, keep: int = 2) -> list[dict]:
    """The `keep` longest stretches of a stage in which its thread ran no torch operator: their seconds, where each
    starts (seconds into the stage) and the operators on either side ("(start)", "(end)": the stage's own ends)."""
    gaps, reach, before = [], start, "(start)"
    for op in outer:
        if op["ts"] > reach:
            gaps.append({"s": (op["ts"] - reach) / 1e6, "at_s": (reach - start) / 1e6, "after": before,
                         "before": op["name"]})
        reach, before = max(reach, op["ts"] + op["dur"]), op["name"]
    if end > reach:
        gaps.append({"s": (end - reach) / 1e6, "at_s": (reach - start) / 1e6, "after": before, "before": "(end)"})
    return sorted(gaps, key=lambda g: -g["s"])[:keep]


def _main_stages(events: list[dict]) -> tuple[tuple, list[dict]]:
    """The worker's main thread -- the thread of the longest stage marker -- and its top-level stage markers."""
    marks = [e for e in events if e.get("cat") == "user_annotation"]
    main = max(marks, key=lambda e: e["dur"]) if marks else {}
    thread = (main.get("pid"), main.get("tid"))
    return thread, _outermost([m for m in marks if (m.get("pid"), m.get("tid")) == thread])


def window(events: list[dict]) -> dict:
    """The trace's span (over the events `slim` keeps), and the top-level stages on the thread of the longest stage
    marker (the worker's main thread): their seconds and where each starts."""
    kept = [e for e in events if e.get("cat") in ("user_annotation", "cpu_op", *GPU)]
    start = min(e["ts"] for e in kept)
    span = (max(e["ts"] + e["dur"] for e in kept) - start) / 1e6
    _, top = _main_stages(kept)
    return {"span_s": span, "stages_s": sum(m["dur"] for m in top) / 1e6,
            "stages": [{"stage": m["name"], "from_s": (m["ts"] - start) / 1e6, "wall_s": m["dur"] / 1e6}
                       for m in top]}


def python_self(events: list[dict], top: int = 10) -> list[dict]:
    """A trace recorded with Python's call stacks (verl's tool_config contents `stack`: torch's `with_stack`, whose
    `python_function` events wrap the operators they call): for each top-level stage of the main thread (`window`'s),
    the Python functions by self time -- a call's seconds less those of the calls and operators directly inside it,
    summed by function -- which names what runs between the operators. Empty for a trace without Python events."""
    calls = [e for e in events if e.get("cat") in ("python_function", "cpu_op")]
    if not any(e.get("cat") == "python_function" for e in calls):
        return []
    own: dict[int, float] = {}
    stacks: dict[tuple, list[dict]] = defaultdict(list)
    for ev in sorted(calls, key=lambda e: (e["ts"], -e["dur"])):
        stack = stacks[(ev.get("pid"), ev.get("tid"))]
        while stack and stack[-1]["ts"] + stack[-1]["dur"] <= ev["ts"]:
            stack.pop()
        if stack:  # the call directly around this one loses its seconds (as far as they overlap)
            parent = stack[-1]
            own[id(parent)] -= min(ev["ts"] + ev["dur"], parent["ts"] + parent["dur"]) - ev["ts"]
        own[id(ev)] = ev["dur"]
        stack.append(ev)
    thread, main_stages = _main_stages(events)
    mine = [e for e in calls if e.get("cat") == "python_function" and (e.get("pid"), e.get("tid")) == thread]
    rows = []
    for mark in main_stages:
        start, end = mark["ts"], mark["ts"] + mark["dur"]
        by_name: dict[str, list[float]] = defaultdict(list)
        for ev in mine:
            if _inside(ev, start, end):
                by_name[ev["name"]].append(max(own[id(ev)], 0) / 1e6)
        named = sorted(by_name.items(), key=lambda item: -sum(item[1]))
        rows.append({"stage": mark["name"], "wall_s": mark["dur"] / 1e6,
                     "python_self_s": sum(sum(v) for v in by_name.values()),
                     "top": [{"function": name, "calls": len(v), "self_s": sum(v)} for name, v in named[:top]]})
    return rows


def slim(events: list[dict]) -> list[dict]:
    """What `stages` and `window` read: the markers, each thread's outermost CPU operators, the GPU activity."""
    gpu = [{k: v for k, v in e.items() if k != "args"} for e in events if e.get("cat") in GPU]
    return ([e for e in events if e.get("cat") == "user_annotation"]
            + _outermost([e for e in events if e.get("cat") == "cpu_op"]) + gpu)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("trace", type=Path)
    ap.add_argument("--top", type=int, default=10, help="operators listed a stage (by total seconds)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--slim", type=Path, metavar="OUT", help="write the slim copy (gzipped JSON) and read it back")
    args = ap.parse_args(argv)
    try:
        events = load(args.trace)
        python = python_self(events, args.top)  # before any slim copy, which keeps no Python events
        if args.slim:
            tmp = args.slim.with_name(args.slim.name + ".tmp")
            try:
                with gzip.open(tmp, "wt") as out:
                    json.dump({"traceEvents": slim(events)}, out)
                tmp.replace(args.slim)
            finally:  # nothing half-written left beside OUT (a folder there, a full disk)
                tmp.unlink(missing_ok=True)
            events = load(args.slim)
        rows = stages(events, args.top)
    except (OSError, ValueError) as exc:
        print(f"torch_trace.py: {exc}", file=sys.stderr)
        return 2
    if not rows:
        print(f"torch_trace.py: {args.trace}: no stage marker (user_annotation) in the trace", file=sys.stderr)
        return 2
    span = window(events)
    if args.json:
        print(json.dumps({"stages": rows, "window": span, **({"python": python} if python else {})}, indent=1))
        return 0
    for r in rows:
        print(f"{r['stage']}: {r['wall_s']:.3f} s wall, GPU kernels {r['gpu_s']:.3f} s, "
              f"outermost CPU operators {r['cpu_ops_s']:.3f} s, outside any operator {r['outside_ops_s']:.3f} s")
        for op in r["top"]:
            print(f"  {op['total_s']:8.4f} s  {op['calls']:6d} x  {op['op']}")
        if r["gaps"]:
            print("  longest without an operator: " + "; ".join(
                f"{g['s']:.4f} s at {g['at_s']:.4f} s (after {g['after']}, before {g['before']})" for g in r["gaps"]))
    listed = ", ".join(f"{t['stage']} {t['wall_s']:.3f} s at {t['from_s']:.2f}" for t in span["stages"])
    print(f"window: {span['span_s']:.2f} s; top-level stages {span['stages_s']:.2f} s of it ({listed})")
    for r in python:
        print(f"python {r['stage']}: {r['wall_s']:.3f} s wall, Python functions' self time {r['python_self_s']:.3f} s")
        for fn in r["top"]:
            print(f"  {fn['self_s']:8.4f} s  {fn['calls']:6d} x  {fn['function']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

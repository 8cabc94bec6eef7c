#!/usr/bin/env python3
"""Read Ray's timeline (`ray.timeline()`, which verl writes at the end of a run given
`ray_kwargs.timeline_json_file`): every remote call that ran, grouped by what was called, with how long it took
where it ran -- the whole call, and its three parts as Ray records them (arguments deserialized, the method
executed, its outputs stored).

    python3 benchmarks/gpu/ray_timeline.py TIMELINE.json[.gz] [--top N] [--json]
    python3 benchmarks/gpu/ray_timeline.py TIMELINE.json[.gz] --startup
    python3 benchmarks/gpu/ray_timeline.py TIMELINE.json[.gz] --steps METRICS.jsonl

`--startup`: the first call of each name, in order, from the start of verl's TaskRunner `run` -- what the
launch does before step 1, actor by actor (the gaps between calls are Ray starting the next actors' processes).
`--steps`: per training step, what verl times on its driver (`timing_s/old_log_prob`, `ref`, `update_actor`,
`update_weights`, `gen`; read with the project's metrics reader) beside what its worker call ran (the method's
execution), and the step's 512-or-so rollout requests as vLLM's server ran them: from the first request's start
to the last one's end, and how long the requests took to arrive. The calls are assigned to steps in order: the
k-th `update_actor` ends step k, and the log-prob calls before it are old log-probs, then the reference's
(docs/bench/gpu-overhead.md).
"""
from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PARTS = ("task:deserialize_arguments", "task:execute", "task:store_outputs")


def read_json(path: Path):
    """A JSON file as the GPU host wrote it, plain or gzipped (`.gz`); one that is not JSON is a ValueError naming
    it. torch_trace.py reads its traces with it too."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt") as fh:
            return json.load(fh)
    except (json.JSONDecodeError, EOFError, gzip.BadGzipFile) as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None


def load(path: Path) -> list[dict]:
    events = read_json(path)
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


def startup(grouped: dict[str, list[dict]]) -> list[dict]:
    """The first call of each name, from the start of the TaskRunner's `run`, in order."""
    runs = grouped.get("TaskRunnerV1.run") or grouped.get("TaskRunner.run")
    if not runs:
        raise ValueError("no TaskRunner run in the timeline (not a verl launch?)")
    t0 = runs[0]["ts"]
    rows = []
    for name, items in grouped.items():
        first = min(items, key=lambda c: c["ts"])
        if first["ts"] >= t0 and not name.startswith("TaskRunner"):
            rows.append({"at_s": first["ts"] - t0, "name": name, "first_s": first["total"],
                         "waited_for_arguments_s": first.get("deserialize_arguments", 0.0), "calls": len(items)})
    return sorted(rows, key=lambda r: r["at_s"])


def _by_step(grouped: dict[str, list[dict]]) -> list[dict]:
    """The worker calls of each training step: (old log-prob, reference, update, weight sync) executions."""
    updates = sorted(grouped.get("WorkerDict.actor_rollout_update_actor", []), key=lambda c: c["ts"])
    log_probs = sorted(grouped.get("WorkerDict.actor_rollout_compute_log_prob", []), key=lambda c: c["ts"])
    syncs = sorted(grouped.get("WorkerDict.actor_rollout_update_weights", []), key=lambda c: c["ts"])
    requests = sorted(grouped.get("vLLMHttpServer.generate", []), key=lambda c: c["ts"])
    steps, before = [], float("-inf")
    for update in updates:
        inside = [c for c in log_probs if before < c["ts"] < update["ts"]]
        if len(inside) != 2:
            raise ValueError(f"{len(inside)} log-prob call(s) before the update at {update['ts']:.1f} s, not 2 "
                             "(old log-probs and the reference's in the actor, as with LoRA)")
        sync = next((c for c in syncs if c["ts"] > update["ts"]), None)
        wave = [c for c in requests if before < c["ts"] < inside[0]["ts"]]
        steps.append({"old_log_prob": inside[0].get("execute"), "ref": inside[1].get("execute"),
                      "update_actor": update.get("execute"), "update_weights": sync and sync.get("execute"),
                      "requests": len(wave),
                      "wave_s": (max(c["ts"] + c["total"] for c in wave) - wave[0]["ts"]) if wave else None,
                      "arrival_s": (wave[-1]["ts"] - wave[0]["ts"]) if wave else None})
        before = update["ts"] + update["total"]
    return steps


def steps_table(grouped: dict[str, list[dict]], metrics: Path) -> list[dict]:
    sys.path.insert(0, str(REPO))
    from rlrecipes.verl.run_metrics import read_jsonl

    logged = read_jsonl(metrics).steps
    rows = []
    for number, worker in enumerate(_by_step(grouped), 1):
        driver = {k.removeprefix("timing_s/"): v for k, v in logged.get(number, {}).items()
                  if k.startswith("timing_s/")}
        rows.append({"step": number, "driver": driver, "worker": worker})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("timeline", type=Path)
    ap.add_argument("--top", type=int, default=25, help="rows to print (by total seconds)")
    ap.add_argument("--json", action="store_true", help="every row as JSON")
    view = ap.add_mutually_exclusive_group()
    view.add_argument("--startup", action="store_true", help="the first call of each name, in order")
    view.add_argument("--steps", type=Path, metavar="METRICS", help="driver phases beside worker calls, by step")
    args = ap.parse_args(argv)
    try:
        grouped = calls(load(args.timeline))
        if args.startup:
            rows = startup(grouped)
        elif args.steps:
            rows = steps_table(grouped, args.steps)
        else:
            rows = summary(grouped)
    except (OSError, ValueError) as exc:
        print(f"ray_timeline.py: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0

    def fmt(value: float | None, digits: int = 3) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    if args.startup:
        print("| from run's start, s | called | its first call, s | of which waiting for its arguments | calls |")
        print("| ---: | --- | ---: | ---: | ---: |")
        for r in rows:
            print(f"| {r['at_s']:.1f} | `{r['name']}` | {r['first_s']:.2f} | {r['waited_for_arguments_s']:.2f} | "
                  f"{r['calls']} |")
        return 0
    if args.steps:
        print("| step | old log-probs: driver / worker | reference | update | weight sync | generation: driver | "
              "the requests in vLLM, first start to last end | their arrival |")
        print("| ---: | --- | --- | --- | --- | ---: | ---: | ---: |")
        for r in rows:
            d, w = r["driver"], r["worker"]
            pair = [f"{fmt(d.get(k), 2)} / {fmt(w[k], 2)}" for k in ("old_log_prob", "ref", "update_actor",
                                                                       "update_weights")]
            print(f"| {r['step']} | {' | '.join(pair)} | {fmt(d.get('gen'), 2)} | {fmt(w['wave_s'], 2)} "
                  f"({w['requests']}) | {fmt(w['arrival_s'], 2)} |")
        return 0

    print("| called | calls | workers | total s | median s | max s | deserialize | execute | store |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows[:args.top]:
        print(f"| `{r['name']}` | {r['calls']} | {r['workers']} | {r['sum_s']:.1f} | {fmt(r['median_s'])} | "
              f"{fmt(r['max_s'])} | {fmt(r['deserialize_arguments_median_s'])} | {fmt(r['execute_median_s'])} | "
              f"{fmt(r['store_outputs_median_s'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

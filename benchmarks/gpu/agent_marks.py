#!/usr/bin/env python3
"""Split verl's rollout phase (`timing_s/gen`) into where its wall-clock time went, per step, from the
agent-loop marks (RLRECIPES_AGENT_MARKS, benchmarks/gpu/site), verl's phase marks (RLRECIPES_PHASE_MARKS) and,
when given, the GPU samples (benchmarks/gpu/gpu_sampler.py):

    python3 benchmarks/gpu/agent_marks.py AGENT.jsonl PHASES.jsonl [--samples SAMPLES.jsonl] [--out split.json]

For each `gen` span, the marks that start inside it are its own. The segments, in order:
  submit      gen starts -> the first response reaches the vLLM server (wake-up, dispatch to the workers)
  engine      first server start -> last server end (the engine generating; GPU busy here)
  return      last server end -> last client end (the response travelling back to its agent-loop worker)
  postprocess last client end -> last session end (reward request, tensors, transfer-queue put)
  poll        last session end -> the replay buffer's last poll ends (it polls every 2 s)
  sleep       that poll -> gen ends (the trainer puts vLLM to sleep)
Per-response durations (score, session minus client: the post-processing of one response) are given as
mean and max; from the GPU samples, the first busy sample (utilisation >= --busy), the busy time (busy
samples x the sampling interval) and each idle stretch of >= --min-idle seconds inside the span.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from phase_peaks import read_jsonl  # the same folder: both read the marks and samples written on the GPU host


def _stats(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    return {"n": len(values), "mean": round(statistics.fmean(values), 3), "max": round(max(values), 3)}


def _interval(samples: list[dict]) -> float:
    if len(samples) < 2:
        return 0.0
    return (samples[-1]["t"] - samples[0]["t"]) / (len(samples) - 1)


def _idle_stretches(samples: list[dict], t0: float, t1: float, busy: float, min_idle: float) -> list[list[float]]:
    """[start, seconds] (start from t0) of each run of samples below `busy` lasting >= min_idle."""
    out, start = [], None
    for sample in samples:
        if sample.get("util", 0) < busy:
            start = sample["t"] if start is None else start
        else:
            if start is not None and sample["t"] - start >= min_idle:
                out.append([round(start - t0, 3), round(sample["t"] - start, 3)])
            start = None
    if start is not None and t1 - start >= min_idle:
        out.append([round(start - t0, 3), round(t1 - start, 3)])
    return out


def split_gen(agent: list[dict], phases: list[dict], samples: list[dict] | None = None, busy: float = 10.0,
              min_idle: float = 2.0) -> list[dict]:
    gens = sorted((m for m in phases if m["phase"] == "gen"), key=lambda m: m["t0"])
    steps = []
    for index, gen in enumerate(gens, start=1):
        t0, t1 = gen["t0"], gen["t1"]
        inside = [m for m in agent if t0 <= m["t0"] <= t1]
        by = {what: sorted((m for m in inside if m["what"] == what), key=lambda m: m["t1"])
              for what in ("server", "client", "score", "session", "poll")}
        step: dict = {"step": index, "gen_seconds": round(t1 - t0, 3), "responses": len(by["session"])}
        if by["server"] and by["session"]:
            first_server = min(m["t0"] for m in by["server"])
            last_server = by["server"][-1]["t1"]
            last_client = by["client"][-1]["t1"] if by["client"] else last_server
            last_session = by["session"][-1]["t1"]
            polls = [m for m in by["poll"] if m["t1"] <= t1]
            last_poll = polls[-1]["t1"] if polls else last_session
            marks = [("submit", t0, first_server), ("engine", first_server, last_server),
                     ("return", last_server, last_client), ("postprocess", last_client, last_session),
                     ("poll", last_session, max(last_session, last_poll)), ("sleep", max(last_session, last_poll), t1)]
            step["segments"] = {name: round(b - a, 3) for name, a, b in marks}
            # one response's post-processing: its session ends after its client call returned
            clients = sorted(m["t1"] for m in by["client"])
            sessions = sorted(m["t1"] for m in by["session"])
            step["per_response"] = {
                "server_seconds": _stats([m["t1"] - m["t0"] for m in by["server"]]),
                "score_seconds": _stats([m["t1"] - m["t0"] for m in by["score"]]),
                "post_seconds": _stats([s - c for s, c in zip(sessions, clients)]),
            }
            step["polls"] = len(polls)
        if samples:
            inside_gen = sorted((x for x in samples if t0 <= x["t"] <= t1), key=lambda x: x["t"])
            hot = [x["t"] for x in inside_gen if x.get("util", 0) >= busy]
            if hot:
                step["gpu_busy"] = {"first_from_gen_start": round(hot[0] - t0, 3),
                                    "busy_samples_seconds": round(len(hot) * _interval(inside_gen), 3),
                                    "idle_stretches": _idle_stretches(inside_gen, t0, t1, busy, min_idle)}
        steps.append(step)
    return steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("agent", type=Path)
    parser.add_argument("phases", type=Path)
    parser.add_argument("--samples", type=Path)
    parser.add_argument("--busy", type=float, default=10.0, help="GPU utilisation %% that counts as busy")
    parser.add_argument("--min-idle", type=float, default=2.0, help="shortest idle stretch reported, seconds")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    samples = read_jsonl(args.samples) if args.samples else None
    steps = split_gen(read_jsonl(args.agent), read_jsonl(args.phases), samples, args.busy, args.min_idle)
    text = json.dumps(steps, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Throughput of the shared GSM8K scorer on one core.

Target (issue 3): >= 200,000 responses of ~1 KB per second; a batch of 1024 prompts x 5 responses well
under 50 ms. verl's naive reward manager calls the scorer once per response, in one process, with
keyword arguments merged from reward_kwargs -- the "verl call" rows time exactly that call shape.

Run: .venvs/dev/bin/python benchmarks/bench_scorer.py [--repeats 15] [--json]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlrecipes.rewards.gsm8k import compute_score  # noqa: E402

PROMPTS, RESPONSES_PER_PROMPT = 1024, 5
TARGET_PER_SECOND = 200_000
BATCH_BUDGET_MS = 50.0

SENTENCES = [
    "Natalia sold {a} clips in April and half as many in May, so {b} clips in May.",
    "Together that is {a} + {b} = {c} clips.",
    "Each box holds {a} pencils, and there are {b} boxes, so {c} pencils in total.",
    "She spends ${a} on books and ${b} on pens, which is ${c} altogether.",
    "Let's check the arithmetic once more to be sure the total is right.",
    "The remaining amount is {c} - {a} = {b}.",
]


def _response(rng: random.Random, target_chars: int, mode: str) -> tuple[str, str]:
    answer = rng.randint(1, 99_999)
    parts: list[str] = []
    while sum(len(p) + 1 for p in parts) < target_chars - 20:
        a, b = rng.randint(1, 999), rng.randint(1, 999)
        parts.append(rng.choice(SENTENCES).format(a=a, b=b, c=a + b))
    body = " ".join(parts)
    # Half right, half wrong, some without the final line: all branches of the scorer are taken.
    shown = answer if rng.random() < 0.5 else answer + 1
    tail = f"\n#### {shown:,}" if rng.random() < 0.9 else f"\nThe answer is {shown}."
    text = f"<think>{body}</think>{tail}" if mode == "think" else body + tail
    return text, str(answer)


def make_batch(mode: str, seed: int = 0, chars: int = 1024) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [_response(rng, chars, mode) for _ in range(PROMPTS * RESPONSES_PER_PROMPT)]


def _verl_call(raw_fn, extra_kwargs, *args, **kwargs):
    # verl.trainer.ppo.reward._call_with_kwargs (0.5.0 and 0.8.0): reward_kwargs merged per call.
    return raw_fn(*args, **{**kwargs, **extra_kwargs})


def time_batch(batch, fn) -> tuple[float, float]:
    # (CPU seconds of this process, wall seconds). CPU time is what one core spends and is not
    # inflated by other processes sharing the core; wall time is shown next to it.
    cpu, wall = time.process_time(), time.perf_counter()
    for response, truth in batch:
        fn(data_source="openai/gsm8k", solution_str=response, ground_truth=truth, extra_info=None)
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core, as the target says

    rows = []
    for mode in ("strict", "flexible", "think"):
        batch = make_batch(mode)
        mean_chars = statistics.mean(len(r) for r, _ in batch)
        for call, fn in (
            ("direct", functools.partial(compute_score, mode=mode)),
            ("verl call", functools.partial(_verl_call, compute_score, {"mode": mode})),
            ("verl call, dict", functools.partial(_verl_call, compute_score, {"mode": mode, "return_dict": True})),
        ):
            time_batch(batch[:256], fn)  # warm the ground-truth cache and the regex engine
            runs = [time_batch(batch, fn) for _ in range(args.repeats)]
            times = [cpu for cpu, _ in runs]
            median = statistics.median(times)
            rows.append(
                {
                    "mode": mode,
                    "call": call,
                    "responses": len(batch),
                    "mean_chars": round(mean_chars),
                    "batch_ms_median": round(median * 1000, 2),
                    "batch_ms_best": round(min(times) * 1000, 2),
                    "batch_wall_ms_median": round(statistics.median(w for _, w in runs) * 1000, 2),
                    "responses_per_s": round(len(batch) / median),
                }
            )

    pathological = []
    for name, text, truth in [
        ("100 KB of digits, flexible", "1" * 100_000, "72"),
        ("100 KB of '#', strict", "#" * 100_000, "72"),
        ("20k '#### x' markers, strict", "#### x " * 20_000, "72"),
        ("50k Arabic-Indic digits, flexible", "\u0663" * 50_000, "72"),
        ("100 KB without digits, flexible", "no digits here " * 6_700, "72"),
    ]:
        mode = "strict" if "strict" in name else "flexible"
        start = time.process_time()
        compute_score("openai/gsm8k", text, truth, mode=mode)
        pathological.append({"case": name, "ms": round((time.process_time() - start) * 1000, 2)})

    worst = min(r["responses_per_s"] for r in rows)
    worst_batch = max(r["batch_ms_median"] for r in rows)
    verdict = worst >= TARGET_PER_SECOND and worst_batch < BATCH_BUDGET_MS
    summary = {
        "machine": f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, 1 core",
        "rows": rows,
        "pathological": pathological,
        "target": f">= {TARGET_PER_SECOND} responses/s and a {PROMPTS}x{RESPONSES_PER_PROMPT} batch < {BATCH_BUDGET_MS} ms",
        "pass": verdict,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"GSM8K scorer, {PROMPTS} prompts x {RESPONSES_PER_PROMPT} responses, {summary['machine']}")
        print(f"{'mode':<9} {'call':<16} {'chars':>6} {'CPU ms (median/best)':>21} {'wall ms':>8} {'responses/s':>12}")
        for r in rows:
            ms = f"{r['batch_ms_median']:.1f} / {r['batch_ms_best']:.1f}"
            print(
                f"{r['mode']:<9} {r['call']:<16} {r['mean_chars']:>6} {ms:>21} "
                f"{r['batch_wall_ms_median']:>8.1f} {r['responses_per_s']:>12,}"
            )
        print("pathological single responses:")
        for p in pathological:
            print(f"  {p['case']:<36} {p['ms']:>8.2f} ms")
        print(f"target {summary['target']}: {'PASS' if verdict else 'FAIL'}")
    return 0 if verdict else 1


if __name__ == "__main__":
    raise SystemExit(main())

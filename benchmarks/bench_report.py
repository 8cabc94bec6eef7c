"""Time of `rlrecipes report` on long runs: parsing both log formats and writing plots + report.

Set-up (not timed): a run of STEPS steps with ~45 metrics per step (verl's usual set) written as verl 0.8
file-logger JSONL (orjson-like compact lines) and as verl 0.5 console lines behind Ray's prefix with
numpy-2 style values, each split into two launches (a restart at 60 %) with the first one's last line
cut off. Timed: parsing + combining the launches (in process), and the whole `rlrecipes report`
command (a fresh process: interpreter start, imports, 10 PNGs, report.md/html).

Run: .venvs/dev/bin/python benchmarks/bench_report.py [--steps 2000] [--repeats 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

KEYS = (
    ["critic/score/mean", "critic/score/max", "critic/score/min", "critic/rewards/mean", "critic/rewards/max",
     "critic/rewards/min", "critic/advantages/mean", "critic/advantages/max", "critic/advantages/min",
     "critic/returns/mean", "critic/returns/max", "critic/returns/min", "actor/kl_loss", "actor/ppo_kl",
     "actor/grad_norm", "actor/pg_loss", "actor/pg_clipfrac", "actor/entropy", "actor/lr",
     "response_length/mean", "response_length/max", "response_length/min", "response_length/clip_ratio",
     "prompt_length/mean", "prompt_length/max", "prompt_length/min", "prompt_length/clip_ratio",
     "timing_s/gen", "timing_s/old_log_prob", "timing_s/ref", "timing_s/adv", "timing_s/update_actor",
     "timing_s/step", "timing_s/save_checkpoint", "timing_per_token_ms/gen", "timing_per_token_ms/adv",
     "perf/total_num_tokens", "perf/time_per_step", "perf/throughput", "perf/max_memory_allocated_gb",
     "perf/max_memory_reserved_gb", "perf/cpu_memory_used_gb", "global_seqlen/mean", "global_seqlen/max",
     "training/epoch"]
)


def write_logs(root: Path, steps: int) -> tuple[Path, Path]:
    rng = random.Random(0)
    jsonl_dir, console_dir = root / "jsonl", root / "console"
    jsonl_dir.mkdir()
    console_dir.mkdir()
    restart = int(steps * 0.6)
    for name, first, last in (("1", 0, restart + 3), ("2", restart, steps)):
        with open(jsonl_dir / f"metrics-{name}.jsonl", "w") as js, open(console_dir / f"console-{name}.log", "w") as co:
            for step in range(first, last + 1):
                data = {k: rng.random() for k in KEYS}
                if step % 10 == 0:
                    data["val-core/openai/gsm8k/reward/mean@1"] = rng.random()
                js.write(json.dumps({"step": step, "data": data}, separators=(",", ":")) + "\n")
                co.write(f"\x1b[36m(TaskRunner pid=4242)\x1b[0m step:{step} - "
                         + " - ".join(f"{k}:np.float64({v!r})" for k, v in data.items()) + "\n")
                if step % 50 == 0:
                    co.write("(TaskRunner pid=4242) Training Progress:  50%|#####     | 5/10\n")
    for path in (jsonl_dir / "metrics-1.jsonl", console_dir / "console-1.log"):
        data = path.read_bytes()
        path.write_bytes(data[: len(data) - 200])
    return jsonl_dir, console_dir


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from rlrecipes.verl.run_metrics import load_run

    results: dict = {"steps": args.steps, "metrics_per_step": len(KEYS) + 1, "python": platform.python_version(),
                     "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        dirs = dict(zip(("jsonl", "console"), write_logs(tmp, args.steps)))
        for kind, log_dir in dirs.items():
            size = sum(p.stat().st_size for p in log_dir.iterdir())
            parse, full = [], []
            for _ in range(args.repeats):
                started = time.perf_counter()
                run = load_run(log_dir)
                parse.append(time.perf_counter() - started)
                assert len(run.steps) == args.steps + 1, len(run.steps)
                started = time.perf_counter()
                subprocess.run([sys.executable, "-m", "rlrecipes", "report", str(log_dir), "--out", str(tmp / f"r-{kind}")],
                               check=True, capture_output=True, cwd=REPO)
                full.append(time.perf_counter() - started)
            results[kind] = {"bytes": size, "parse_s_median": round(statistics.median(parse), 3),
                             "report_cli_s_median": round(statistics.median(full), 2)}
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"rlrecipes report benchmark: {args.steps} steps x {results['metrics_per_step']} metrics, 2 launches, "
          f"Python {results['python']}, {results['cpus']} CPUs, median of {args.repeats}")
    for kind in ("jsonl", "console"):
        r = results[kind]
        print(f"  {kind:8s} {r['bytes'] / 1e6:6.1f} MB  parse+combine {r['parse_s_median']:.3f} s  "
              f"full `rlrecipes report` {r['report_cli_s_median']:.2f} s")


if __name__ == "__main__":
    main()

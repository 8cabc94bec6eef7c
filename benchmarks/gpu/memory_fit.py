#!/usr/bin/env python3
"""Fit proof: run a recipe's exact architecture (random weights) and batch settings for a few steps
under a GPU memory cap, and report peak memory per phase, seconds per step and tokens per second.

    PYTHONPATH=benchmarks/gpu/site:. python3 benchmarks/gpu/memory_fit.py qwen2.5-0.5b-gsm8k-ppo --arch qwen2.5-0.5b \
        --assets runs/fit/assets --work runs/fit --cap-gib 24 --steps 4

The recipe is resolved as shipped (profile, batch sizes, lengths, offload, checkpointing); only the
paths change: the model is the random `--arch` stand-in built by `rlrecipes smoke-assets --arch`, the
data the synthetic GSM8K (verl left-pads every prompt to max_prompt_length, and a random model never
emits EOS, so every sequence is as long as the recipe allows: the worst case). Checkpoints and
validation are off. The cap and the per-phase peaks come from benchmarks/gpu/site/sitecustomize.py.
Writes WORK/fit-<recipe>.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from rlrecipes.recipe.load import resolve  # noqa: E402
from rlrecipes.smoke.assets import build_assets  # noqa: E402
from rlrecipes.smoke.run import launch  # noqa: E402
from rlrecipes.verl.logs import parse_steps  # noqa: E402

STEP_KEYS = ("timing_s/step", "timing_s/gen", "timing_s/old_log_prob", "timing_s/ref", "timing_s/values",
             "timing_s/update_critic", "timing_s/update_actor", "perf/throughput", "perf/time_per_step",
             "perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb", "response_length/mean",
             "prompt_length/mean", "critic/score/mean", "actor/pg_loss", "critic/vf_loss", "actor/kl_loss",
             # verl >= 0.9: the weight sync after each step, and the rollout-vs-actor log-prob gap
             "timing_s/update_weights", "timing_s/reward", "timing_s/adv", "response_length/clip_ratio",
             "training/rollout_probs_diff_mean", "training/rollout_probs_diff_max",
             "training/rollout_actor_probs_pearson_corr")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recipe")
    parser.add_argument("--arch", required=True)
    parser.add_argument("--assets", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--cap-gib", type=float, default=None,
                        help="cap PyTorch's allocator at this many GiB (a smaller card); default: no cap")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--profile", default=None, help="profile to resolve the recipe with (default: the recipe's)")
    parser.add_argument("--weights-dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--timeout", type=float, default=540)
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides (e.g. a smaller batch)")
    # intermixed: Hydra overrides come after the options
    args = parser.parse_intermixed_args()

    work = args.work.resolve()
    batch = int(resolve(args.recipe, profile=args.profile, overrides=args.overrides).get("data.train_batch_size"))
    # enough rows for --steps full batches within the recipe's epochs
    assets = build_assets(args.assets, args.arch, train_rows=max(256, args.steps * batch), dtype=args.weights_dtype)
    model = assets["model_dir"]
    data = Path(assets["data"])
    env = dict(os.environ)
    env.update({"CKPT_DIR": str(work / "checkpoints"), "LOG_DIR": str(work / "logs"), "RAY_DEDUP_LOGS": "0", "RAY_ADDRESS": "local",
                "PYTHONUNBUFFERED": "1", "RLRECIPES_PHASE_LOG": str(work / f"phases-{args.recipe}.jsonl")})
    if args.cap_gib is not None:
        env["RLRECIPES_GPU_MEMORY_CAP_GIB"] = f"{args.cap_gib:g}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "benchmarks" / "gpu" / "site"), str(REPO),
                                                      env.get("PYTHONPATH")]))
    Path(env["RLRECIPES_PHASE_LOG"]).unlink(missing_ok=True)
    shipped = resolve(args.recipe, profile=args.profile, env=env)
    swaps = [f"actor_rollout_ref.model.path={model}", f"data.train_files={data / 'train.parquet'}",
             f"data.val_files={data / 'test.parquet'}", f"trainer.total_training_steps={args.steps}",
             "trainer.save_freq=-1", "trainer.test_freq=-1", "trainer.val_before_train=false",
             "trainer.resume_mode=disable"]
    if shipped.use_critic:
        swaps.append(f"critic.model.path={model}")
    run = resolve(args.recipe, profile=args.profile, overrides=swaps + args.overrides, env=env)
    cmd = [sys.executable, "-m", "verl.trainer.main_ppo", *run.hydra_overrides()]
    result = launch(cmd, env, run.log_dir / "console-fit.log", None, args.timeout, echo=None)
    steps = parse_steps(result.text)
    phases = [json.loads(line) for line in Path(env["RLRECIPES_PHASE_LOG"]).read_text().splitlines()] \
        if Path(env["RLRECIPES_PHASE_LOG"]).exists() else []

    oom = "OutOfMemoryError" in result.text or "CUDA out of memory" in result.text
    later = [m for s, m in sorted(steps.items()) if s > 1] or list(steps.values())
    summary = {
        "recipe": args.recipe, "arch": args.arch, "cap_gib": args.cap_gib, "rc": result.rc, "oom": oom,
        "steps_logged": sorted(steps), "wall_s": round(result.seconds, 1), "command": cmd,
        "batch": {k: run.get(k) for k in ("data.train_batch_size", "actor_rollout_ref.rollout.n",
                                          "data.max_prompt_length", "data.max_response_length",
                                          "actor_rollout_ref.actor.ppo_mini_batch_size",
                                          "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
                                          "critic.ppo_micro_batch_size_per_gpu",
                                          "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
                                          "actor_rollout_ref.model.enable_gradient_checkpointing",
                                          "actor_rollout_ref.actor.fsdp_config.optimizer_offload",
                                          "actor_rollout_ref.ref.fsdp_config.param_offload",
                                          "actor_rollout_ref.model.lora_rank",
                                          "+actor_rollout_ref.model.override_config._attn_implementation",
                                          "+actor_rollout_ref.actor.fsdp_config.mixed_precision")},
        "per_step": {s: {k: m[k] for k in STEP_KEYS if k in m} for s, m in sorted(steps.items())},
        "mean_after_step_1": {k: round(statistics.mean(m[k] for m in later), 3)
                              for k in STEP_KEYS if later and all(k in m for m in later)},
        "phase_peaks_gib": {},
    }
    for rec in phases:
        peak = summary["phase_peaks_gib"].setdefault(rec["phase"], {"allocated": 0.0, "reserved": 0.0, "calls": 0,
                                                                    "seconds": []})
        peak["allocated"] = max(peak["allocated"], rec["peak_allocated_gib"])
        peak["reserved"] = max(peak["reserved"], rec["peak_reserved_gib"])
        peak["calls"] += 1
        peak["seconds"].append(rec["seconds"])
    try:
        from rlrecipes.plan.memory import estimate_memory

        summary["planner_estimate"] = estimate_memory(shipped).as_dict()
    except Exception as exc:  # the planner is another stage's module; its absence must not lose the run
        summary["planner_estimate"] = f"unavailable: {exc!r}"
    summary["profile"] = run.profile.name
    summary["overrides"] = args.overrides
    out = work / f"fit-{args.recipe}.json"
    out.write_text(json.dumps(summary, indent=2, default=str) + "\n")

    cap = f"under a {args.cap_gib:g} GiB cap" if args.cap_gib is not None else "uncapped"
    print(f"\nfit {args.recipe} ({args.arch}, random weights) {cap}: "
          f"exit {result.rc}, OOM {oom}, steps {sorted(steps)}, wall {result.seconds:.0f} s")
    for phase, peak in summary["phase_peaks_gib"].items():
        print(f"  {phase:<14} peak allocated {peak['allocated']:6.2f} GiB  reserved {peak['reserved']:6.2f} GiB  "
              f"s/call {statistics.mean(peak['seconds']):7.2f}")
    for key, value in summary["mean_after_step_1"].items():
        print(f"  {key:<32} {value}")
    if result.rc != 0:
        print("".join(result.text.splitlines(keepends=True)[-60:]))
    return 0 if result.rc == 0 and not oom and len(steps) == args.steps else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""The PPO canary's seed 2 on the Hopper stack (docs/bench/gpu-canary.md, "The PPO canary's seed 2"), judged again
by `rlrecipes expect` from its recorded logs and eval summary: `make reproduce RECIPE=canary-ppo
PROFILE=any-1gpu-hopper SEED=2` on one H100, to its verdict, as shipped. It learned (+20.5 points, the merged model
as the last step); the contract of its day (one run's bounds) called it MISSED, the contract from seeds calls it
MET. Seed 0, started once seed 2's engine was up, failed in vLLM's memory profiling and ran no step."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from support.verdict import by_name, judged, readings

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "docs" / "bench" / "gpu-data"
RECORD = DATA / "canary-seeds-ppo-hopper-h100-2"
RUN = RECORD / "logs" / "seed-2" / "canary-ppo"
EVAL = RECORD / "models" / "seed-2" / "canary-ppo-merged" / "eval"
SEED_0 = RECORD / "logs" / "seed-0" / "canary-ppo"
H100 = "NVIDIA H100 80GB HBM3"


def judge(capsys, *extra: str) -> tuple[int, dict]:
    return judged(capsys, RUN, "canary-ppo", "--eval", str(EVAL), *extra)


def test_it_learned_and_the_bounds_from_seeds_call_it_met(capsys):
    code, result = judge(capsys, "--gpu", H100, "--strict")
    assert (code, result["status"], result["outcome"]["status"], result["cost"]["status"]) == (0, "met", "met", "met")
    got = by_name(result["checks"])
    assert got["training steps"] == ("met", "step 100 of 100")
    assert got["accuracy before training"] == ("met", "0.1934 at step 0 (11 validations)")
    assert got["accuracy after training"] == ("met", "0.3984 at step 100 (11 validations)")
    assert got["accuracy gain"] == ("met", "+0.2051")
    assert got["training reward rises"] == ("met", "+0.0778 (+0.00079 a step over steps 1-100)")
    assert got["merged model scores what the last trained step scored"] == (
        "met", "0.3945 on 512 problems vs 0.3984 at step 100 (-0.0039)")
    # its cost beside the H100 reference (seed 0's steps on another host)
    assert got["s/step"] == ("met", f"5.04 s (89 steps), 1.03x the reference 4.88 s on {H100}")
    assert got["start-up"] == ("met", f"200 s, 1.21x the reference 166.00 s on {H100}")


def test_the_recorded_verdict_is_the_one_judged_again_under_the_contract_of_its_day(capsys):
    """expect.json as the run wrote it: the same readings; its contract (after >= 0.42, the reward's 10-step window
    +0.10) called it missed on those two, as it did seed 1."""
    recorded = json.loads((RUN / "expect.json").read_text())
    assert recorded["gpu"] == H100
    _, result = judge(capsys, "--gpu", recorded["gpu"])
    moved = ("training reward rises",)  # a 10-step window then, a fitted line now
    assert readings(result["checks"], moved) == readings(recorded["checks"], moved)
    then = by_name(recorded["checks"])
    assert recorded["status"] == "missed"
    assert sorted(name for name, (status, _) in then.items() if status == "missed") == [
        "accuracy after training", "training reward rises"]
    assert then["training reward rises"] == ("missed", "+0.0852 (0.1152 -> 0.2004)")


def test_it_ran_as_shipped_on_the_bytes_another_sitting_built():
    """No override (the seed runner's KV-cache share came after it), and its assets are the bytes the GRPO seeds'
    sitting built for seed 2 on another H100 host (the same sums)."""
    state = json.loads((RUN / "reproduce.json").read_text())
    assert state["identity"]["overrides"] == []
    assert "kv_cache_memory_bytes" not in (RUN / "run-any-1gpu-hopper" / "config.yaml").read_text()
    here, there = ((folder / "assets-seed-2.sha256").read_text().split()
                   for folder in (RECORD, DATA / "canary-seeds-hopper-h100-2"))
    assert here == there and len(here) >= 10


def test_seed_0_failed_in_vllms_memory_profiling_beside_it_and_ran_no_step():
    state = json.loads((SEED_0 / "reproduce.json").read_text())
    assert state["stages"]["train"]["status"] == "failed"
    console = gzip.decompress(next(SEED_0.glob("console-*.log.gz")).read_bytes()).decode(errors="replace")
    assert "AssertionError: Error in memory profiling. Initial free memory 43.88 GiB, current free memory 73.93 GiB" \
        in console
    assert "step:1 " not in console and not list(SEED_0.glob("metrics-*.jsonl"))
    # it started once seed 2's engine was up, and ended while seed 2 stepped
    timeline = (RECORD / "timeline.txt").read_text()
    assert timeline.index("canary-ppo seed 2: rollout engine up") < timeline.index(
        "canary-ppo seed 0: make reproduce") < timeline.index("canary-ppo seed 0: exit 2") < timeline.index(
        "canary-ppo seed 2: exit 2")
    # the same assets the first PPO sitting's host built for seed 0 (the run cut at step 71), but the SFT's seconds
    here = json.loads((RECORD / "models" / "seed-0" / "canary-qwen2" / "canary-manifest.json").read_text())
    there = json.loads((DATA / "canary-ppo-hopper-h100" / "manifest-seed-0.json").read_text())
    assert here["sft"].pop("seconds") != there["sft"].pop("seconds")
    assert here == there

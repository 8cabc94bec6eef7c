"""The PPO canary's seed 1 on the Hopper stack (docs/bench/gpu-canary.md, "The PPO canary's seed 1"), judged
again by `rlrecipes expect` from its recorded logs and eval summary: `make reproduce RECIPE=canary-ppo
PROFILE=any-1gpu-hopper SEED=1` on one H100, to its verdict. It learned (+21.7 points, the merged model as the last
step); the contract of its day -- one run's bounds -- called it MISSED on the two bounds that one run set (its
recorded expect.json), and the contract derived from the seeds (this run one of them) calls it MET. Its control
(the actor's learning rate 0) never got past its start, for a reason the seed runner now reads and retries."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from support.verdict import by_name, judged, readings

REPO = Path(__file__).resolve().parents[2]
RECORD = REPO / "docs" / "bench" / "gpu-data" / "canary-seeds-ppo-hopper-h100"
RUN = RECORD / "logs" / "seed-1" / "canary-ppo"
EVAL = RECORD / "models" / "seed-1" / "canary-ppo-merged" / "eval"
CONTROL = RECORD / "control-frozen-actor" / "logs" / "seed-1" / "canary-ppo"
H100 = "NVIDIA H100 80GB HBM3"


def judge(capsys, *extra: str) -> tuple[int, dict]:
    return judged(capsys, RUN, "canary-ppo", "--eval", str(EVAL), *extra)


def test_it_learned_and_the_bounds_from_seeds_call_it_met(capsys):
    code, result = judge(capsys, "--gpu", H100)
    assert (code, result["status"], result["outcome"]["status"]) == (0, "met", "met")
    got = by_name(result["checks"])
    assert got["training steps"] == ("met", "step 100 of 100")
    assert got["accuracy before training"] == ("met", "0.1797 at step 0 (11 validations)")
    assert got["accuracy after training"] == ("met", "0.3965 at step 100 (11 validations)")
    assert got["accuracy gain"] == ("met", "+0.2168")
    assert got["training reward rises"] == ("met", "+0.1057 (+0.00107 a step over steps 1-100)")
    assert got["merged model scores what the last trained step scored"] == (
        "met", "0.4082 on 512 problems vs 0.3965 at step 100 (+0.0117)")


def test_the_recorded_verdict_is_the_one_judged_again(capsys):
    """expect.json as the run wrote it on its host: the same readings from the copied logs. Its contract (one run's
    bounds: after >= 0.42, the reward's 10-step window +0.10) called it missed on those two."""
    recorded = json.loads((RUN / "expect.json").read_text())
    _, result = judge(capsys, "--gpu", recorded["gpu"])
    moved = ("training reward rises",)  # a 10-step window then, a fitted line now
    assert readings(result["checks"], moved) == readings(recorded["checks"], moved)
    assert [(c["name"], c["status"]) for c in result["cost"]["checks"]] == [
        (c["name"], c["status"]) for c in recorded["cost"]["checks"]]
    assert recorded["status"] == "missed"
    assert sorted(name for name, (status, _) in by_name(recorded["checks"]).items() if status == "missed") == [
        "accuracy after training", "training reward rises"]
    assert by_name(recorded["checks"])["training reward rises"] == ("missed", "+0.0902 (0.1445 -> 0.2348)")


def test_its_cost_is_shown_beside_the_h100_reference(capsys):
    _, result = judge(capsys, "--gpu", H100, "--strict")
    assert result["cost"]["status"] == "met"
    got = by_name(result["checks"])
    assert got["s/step"] == ("met", f"4.17 s (89 steps), 0.85x the reference 4.88 s on {H100}")
    assert got["start-up"] == ("met", f"130 s, 0.78x the reference 166.00 s on {H100}")


def test_the_control_ran_with_its_breakage_and_failed_at_the_start_on_a_port():
    state = json.loads((CONTROL / "reproduce.json").read_text())
    assert state["identity"]["overrides"] == ["actor_rollout_ref.actor.optim.lr=0", "trainer.total_training_steps=30"]
    assert state["stages"]["train"]["status"] == "failed"
    console = gzip.decompress(next(CONTROL.glob("console-*.log.gz")).read_bytes()).decode(errors="replace")
    assert "'lr': 0," in console  # verl's actor optimizer took the override
    assert "sock.bind((bind_host, 0))" in console and "OSError: [Errno 98] Address already in use" in console
    assert "step:1 " not in console  # no step ran


def test_the_assets_are_the_bytes_another_host_built():
    """Seed 1's canary manifest equals the PPO seed-0 sitting's build of seed 1 except the SFT's seconds."""
    here = json.loads((RECORD / "models" / "seed-1" / "canary-qwen2" / "canary-manifest.json").read_text())
    there = json.loads((REPO / "docs/bench/gpu-data/canary-ppo-hopper-h100/manifest-seed-1.json").read_text())
    assert here["sft"].pop("seconds") != there["sft"].pop("seconds")
    assert here == there
    assert round(here["start"]["accuracy"], 3) == 0.18

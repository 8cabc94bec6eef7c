"""The PPO canary's seed 0 to its verdict, and the GRPO canary's shuffled-reward control with the shipped settings,
side by side on one H100 (docs/bench/gpu-canary.md, "The PPO canary's third seed and the GRPO canary's shuffled
control"), judged again by `rlrecipes expect` from the recorded logs: seed 0 learned and is met (the third seed of
canary-ppo's contract); the control's reward did not rise and it is missed (a control of canary-grpo-lora's
contract). Both ran with the seed runner's fixed KV-cache share, which kept vLLM from profiling the GPU's free
memory while the other run's engine slept and woke."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from rlrecipes.preflight.checks.host import PORTS_HELD_BY_ONE_RUN
from rlrecipes.verl.run_metrics import load_run
from support.sockstat import samples
from support.verdict import by_name, judged, readings

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "docs" / "bench" / "gpu-data"
RECORD = DATA / "canary-seeds-ppo-hopper-h100-3"
RUN = RECORD / "logs" / "seed-0" / "canary-ppo"
EVAL = RECORD / "models" / "seed-0" / "canary-ppo-merged" / "eval"
CONTROL = RECORD / "control-shuffled"
CONTROL_RUN = CONTROL / "logs" / "seed-0" / "canary-grpo-lora"
H100 = "NVIDIA H100 80GB HBM3"
KV_SHARE = "+actor_rollout_ref.rollout.engine_kwargs.vllm.kv_cache_memory_bytes=1073741824"


def test_seed_0_learned_and_is_met_with_its_cost_shown(capsys):
    code, result = judged(capsys, RUN, "canary-ppo", "--eval", str(EVAL), "--gpu", H100)
    assert (code, result["status"], result["outcome"]["status"]) == (0, "met", "met")
    got = by_name(result["checks"])
    assert got["training steps"] == ("met", "step 100 of 100")
    assert got["accuracy before training"] == ("met", "0.2207 at step 0 (11 validations)")
    assert got["accuracy after training"] == ("met", "0.4980 at step 100 (11 validations)")
    assert got["accuracy gain"] == ("met", "+0.2773")
    assert got["training reward rises"] == ("met", "+0.2371 (+0.00239 a step over steps 1-100)")
    assert got["merged model scores what the last trained step scored"] == (
        "met", "0.5000 on 512 problems vs 0.4980 at step 100 (+0.0020)")
    # beside the control for part of its steps: a cost, shown against the lone run's reference
    assert got["s/step"] == ("met", f"5.61 s (89 steps), 1.15x the reference 4.88 s on {H100}")
    assert got["start-up"] == ("met", f"225 s, 1.35x the reference 166.00 s on {H100}")


def test_the_recorded_verdict_is_the_one_judged_again(capsys):
    recorded = json.loads((RUN / "expect.json").read_text())
    assert (recorded["gpu"], recorded["status"]) == (H100, "met")
    _, result = judged(capsys, RUN, "canary-ppo", "--eval", str(EVAL), "--gpu", recorded["gpu"])
    assert readings(result["checks"]) == readings(recorded["checks"])


def test_seed_0_ran_with_the_kv_cache_share_alone_on_the_bytes_of_another_host():
    """The runner's one override, in the state and in the config verl printed (the run directory holds the
    recipe's launch, which a command's overrides do not change); the assets are the bytes the second PPO sitting's
    host built for seed 0 (the same sums), whose run there failed in vLLM's memory profiling."""
    state = json.loads((RUN / "reproduce.json").read_text())
    assert state["identity"]["overrides"] == [KV_SHARE]
    assert all(state["stages"][stage]["status"] == "done"
               for stage in ("assets", "train", "merge", "eval", "report", "expect"))
    assert "kv_cache_memory_bytes" not in (RUN / "run-any-1gpu-hopper" / "config.yaml").read_text()
    console = gzip.decompress(next(RUN.glob("console-*.log.gz")).read_bytes()).decode(errors="replace")
    assert "'kv_cache_memory_bytes': 1073741824" in console and "Error in memory profiling" not in console
    here, there = ((folder / "assets-seed-0.sha256").read_text().split()
                   for folder in (RECORD, DATA / "canary-seeds-ppo-hopper-h100-2"))
    assert here == there and len(here) >= 10


def test_the_same_seed_on_another_host_followed_the_same_curve():
    """Seed 0's held-out accuracy here and in the run cut at step 71 on the first PPO sitting's host (the same
    assets): the same start, then within 0.02 at every validation -- far closer than the seeds are to each other."""
    def validations(log_dir: Path) -> dict[int, float]:
        return dict(zip(*load_run(log_dir).series("val-core/openai/gsm8k/acc/mean@1")))

    here = validations(RUN)
    there = validations(DATA / "canary-ppo-hopper-h100" / "logs" / "canary-ppo")
    assert sorted(there) == list(range(0, 71, 10)) and here[0] == there[0]
    assert max(abs(here[step] - there[step]) for step in there) <= 0.02


def test_the_shuffled_control_is_missed_on_the_reward_it_controls(capsys):
    code, result = judged(capsys, CONTROL_RUN, "canary-grpo-lora", "--gpu", H100)
    assert (code, result["outcome"]["status"]) == (1, "missed")
    got = by_name(result["checks"])
    assert got["training reward rises"] == ("missed", "+0.0009 (+0.00002 a step over steps 1-40)")
    assert got["training steps"] == ("missed", "step 40 of 60")
    # the rollout and the trainer agreed: the reward, not the adapter sync, is what it breaks
    agreement = [c["status"] for c in result["checks"] if c["name"].startswith("rollout vs trainer")]
    assert agreement == ["met", "met"]


def test_the_controls_console_is_the_train_stage_of_its_make_reproduce_output():
    """The sitting ended during the control's eval: its run's own files did not come back, its `make reproduce`
    output did. The console log the contract reads is that output's train stage, byte for byte."""
    output = gzip.decompress((CONTROL / "reproduce-canary-grpo-lora-0-shuffled.log.gz").read_bytes())
    lines = output.split(b"\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(b"[reproduce] train: rlrecipes stage"))
    end = next(i for i, line in enumerate(lines) if line.startswith(b"[reproduce] train: done"))
    assert lines[start].endswith(f"resume -- {KV_SHARE} trainer.total_training_steps=40".encode())
    assert (CONTROL_RUN / "console-20261207T194143Z.log").read_bytes() == b"\n".join(lines[start + 1:end]) + b"\n"
    assert "rlrecipes/smoke/shuffled_reward.py" in (RECORD / "timeline.txt").read_text()


def test_the_control_started_once_seed_0s_engine_was_up_and_seed_0_ended_met():
    timeline = (RECORD / "timeline.txt").read_text()
    assert timeline.index("canary-ppo seed 0: rollout engine up") < timeline.index(
        "canary-grpo-lora seed 0 (control: shuffled): make reproduce") < timeline.index(
        "canary-ppo seed 0: exit 0; [reproduce] canary-ppo on any-1gpu-hopper (seed 0): expected result met")


def test_two_canaries_at_once_held_no_more_distinct_ports_than_one_alone():
    """The sockets in TIME_WAIT nearly doubled with two runs stepping; the distinct ports they held did not grow past
    the most one run's steps held (preflight's figure), near half the widened range (docs/bench/gpu-canary.md)."""
    assert (RECORD / "sockstat.txt").read_text().splitlines()[0] == "ephemeral ports: 10240-65535"
    held = samples(RECORD / "sockstat.txt")
    assert max(sockets for sockets, _ in held) == 52_573 and max(ports for _, ports in held) == 27_432
    half = (65535 - 10240 + 1) // 2  # 27,648: the ports of one parity, which connect() takes first
    assert max(ports for _, ports in held) < PORTS_HELD_BY_ONE_RUN <= half

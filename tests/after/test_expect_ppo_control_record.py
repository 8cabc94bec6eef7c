"""The PPO canary's negative controls on the Hopper stack (docs/bench/gpu-canary.md, "The PPO canary's controls"),
judged again by `rlrecipes expect` from their recorded logs: seed 1's assets (the same bytes as the run that learned,
docs/bench/gpu-data/canary-seeds-ppo-hopper-h100), the same command with one thing broken, cut to 30 steps, both
on one H100, the second started while the first stepped, with the host's ephemeral port range widened.

- frozen-actor (the actor's learning rate 0): the outcome misses on accuracy and on the reward trend, with the
  training-steps check set aside (a control is cut short on purpose), while seed 1 on the same bytes gained +21.7
  points; its cost is the shipped run's.
- shuffled (the reward that ignores the answer): the reward trend misses. verl validates with the same reward, so
  its "accuracy" is that reward too, and only the reward counts; it was cut after its 30th step, before its merge.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from rlrecipes.preflight.checks.host import PORTS_ADVISED, PORTS_HELD_BY_ONE_RUN
from support.sockstat import tw_ports
from support.verdict import by_name, judged, readings

REPO = Path(__file__).resolve().parents[2]
RECORD = REPO / "docs" / "bench" / "gpu-data" / "canary-controls-ppo-hopper-h100"
FROZEN = RECORD / "control-frozen-actor"
SHUFFLED = RECORD / "control-shuffled"
RUN = Path("logs") / "seed-1" / "canary-ppo"
FROZEN_EVAL = FROZEN / "models" / "seed-1" / "canary-ppo-merged" / "eval"
H100 = "NVIDIA H100 80GB HBM3"


def judge(capsys, folder: Path, *extra: str) -> tuple[int, dict]:
    return judged(capsys, folder / RUN, "canary-ppo", "--gpu", H100, *extra)


def test_the_frozen_actor_misses_on_accuracy_and_reward(capsys):
    code, result = judge(capsys, FROZEN, "--eval", str(FROZEN_EVAL))
    assert (code, result["status"], result["outcome"]["status"]) == (1, "missed", "missed")
    got = by_name(result["checks"])
    assert got["training steps"] == ("missed", "step 30 of 100")
    assert got["accuracy before training"] == ("met", "0.1797 at step 0 (4 validations)")
    # the policy never moved: the same greedy answers at every validation
    assert got["accuracy after training"] == ("missed", "0.1797 at step 30 (4 validations)")
    assert got["accuracy gain"] == ("missed", "+0.0000")
    assert got["training reward rises"] == ("missed", "-0.0055 (-0.00019 a step over steps 1-30)")
    assert got["merged model scores what the last trained step scored"] == (
        "met", "0.1777 on 512 problems vs 0.1797 at step 30 (-0.0020)")
    assert result["cost"]["status"] == "met"
    assert got["s/step"] == ("met", f"4.77 s (26 steps), 0.98x the reference 4.88 s on {H100}")


def test_the_frozen_actors_recorded_verdict_is_the_one_judged_again(capsys):
    recorded = json.loads((FROZEN / RUN / "expect.json").read_text())
    _, result = judge(capsys, FROZEN, "--eval", str(FROZEN_EVAL))
    assert recorded["gpu"] == H100 and result["status"] == recorded["status"]
    moved = ("training reward rises",)  # a 10-step window when it ran, a fitted line now: missed by both
    assert readings(result["checks"], moved) == readings(recorded["checks"], moved)
    assert by_name(recorded["checks"])["training reward rises"] == ("missed", "-0.0055 (0.1078 -> 0.1023)")
    for part in ("outcome", "cost"):
        assert [(c["name"].split(" (")[0], c["status"]) for c in result[part]["checks"]] == [
            (c["name"].split(" (")[0], c["status"]) for c in recorded[part]["checks"]]


def test_the_frozen_actor_ran_with_its_breakage_on_the_learning_runs_assets():
    state = json.loads((FROZEN / RUN / "reproduce.json").read_text())
    assert state["identity"]["overrides"] == ["actor_rollout_ref.actor.optim.lr=0", "trainer.total_training_steps=30"]
    console = gzip.decompress(next((FROZEN / RUN).glob("console-*.log.gz")).read_bytes()).decode(errors="replace")
    assert "'lr': 0," in console
    seeds = REPO / "docs" / "bench" / "gpu-data" / "canary-seeds-ppo-hopper-h100"
    here, there = ([line.split()[:2] for line in (folder / "assets-seed-1.sha256").read_text().splitlines()]
                   for folder in (RECORD, seeds))
    assert here == there and len(here) >= 5


def test_the_shuffled_reward_misses_on_the_reward_trend(capsys):
    code, result = judge(capsys, SHUFFLED)
    assert code == 1
    got = by_name(result["checks"])
    assert got["training steps"] == ("missed", "step 30 of 100")
    assert got["training reward rises"] == ("missed", "-0.0157 (-0.00054 a step over steps 1-30)")
    state = json.loads((SHUFFLED / RUN / "reproduce.json").read_text())
    assert state["identity"]["overrides"] == ["trainer.total_training_steps=30"]
    # the reward verl ran with (its resolved config, as the run directory recorded it)
    config = (SHUFFLED / RUN / "run-any-1gpu-hopper" / "config.yaml").read_text()
    assert "path: /root/repo/rlrecipes/smoke/shuffled_reward.py" in config


def test_both_started_beside_each_other_with_the_wider_port_range():
    """One canary's steps hold ~26,000 distinct ports in TIME_WAIT (TransferQueue's per-call sockets): nearly all
    of Linux's default range (32768-60999, 28,232 ports), a quarter short of the widened one."""
    assert (RECORD / "sockstat.txt").read_text().splitlines()[0] == "ephemeral ports: 10240-65535"
    held = tw_ports(RECORD / "sockstat.txt")
    assert 25_000 < max(held) < 27_000 < 28_232
    # the figure preflight's ports check is built on: the most any recorded run's steps held
    peaks = [max(ports) for path in (REPO / "docs" / "bench" / "gpu-data").glob("*/sockstat.txt")
             if (ports := tw_ports(path))]
    assert max(held) in peaks and max(peaks) == PORTS_HELD_BY_ONE_RUN
    assert PORTS_ADVISED <= 65535 - 10240 + 1  # compose.yaml's range passes the check
    timeline = (RECORD / "timeline.txt").read_text()
    assert "ephemeral port range set to 10240 65535" in timeline
    assert "canary-ppo seed 1 (control: shuffled): rollout engine up after 240s" in timeline
    assert "Errno 98" not in timeline and "the same command again" not in timeline

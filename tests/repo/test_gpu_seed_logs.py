"""benchmarks/gpu/seed_logs.sh, what canary_seeds.sh reads: a RUNS entry's parts and what a control changes; and
in a seed run's console logs, on the recorded logs: a run another run on the host made fail is named and run
again; a run that failed or ran on its own is not; a log from before the run's start (a relayed run's earlier
sitting) does not count."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SEED_LOGS = REPO / "benchmarks" / "gpu" / "seed_logs.sh"
DATA = REPO / "docs" / "bench" / "gpu-data"
# seed 2's first start, beside seed 1 on one H100 host: the trainer's port taken (EADDRINUSE)
PORT_TAKEN = DATA / "canary-seeds-hopper-h100-2/logs/seed-2/canary-grpo-lora/console-20261207T081209Z.log.gz"
# seed 2 again, the same command, to its verdict
SEED_2 = DATA / "canary-seeds-hopper-h100-2/logs/seed-2/canary-grpo-lora/console-20261207T082020Z.log.gz"
# the PPO control's start beside seed 1's steps on one H100 host: TransferQueue's bind to port 0 refused
NO_PORT = (DATA / "canary-seeds-ppo-hopper-h100/control-frozen-actor/logs/seed-1/canary-ppo"
           / "console-20261207T112410Z.log.gz")
# PPO seed 0 started once seed 2's engine was up, on one H100 host: seed 2's engine slept while seed 0's profiled
PROFILING = (DATA / "canary-seeds-ppo-hopper-h100-2/logs/seed-0/canary-ppo/console-20261207T165952Z.log.gz")
# the first Hopper sitting: the canary's vLLM found no KV-cache memory while two others started beside it
NO_KV = next((DATA / "canary-vllm/canary/logs/canary-grpo-lora").glob("console-*.log"))


def place(run: Path, recorded: Path) -> None:
    """A recorded console log where the run writes its own, as `console-*.log`."""
    run.mkdir(parents=True, exist_ok=True)
    name = recorded.name.removesuffix(".gz")
    if recorded.suffix == ".gz":
        (run / name).write_bytes(gzip.decompress(recorded.read_bytes()))
    else:
        shutil.copyfile(recorded, run / name)


def call(snippet: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`snippet` run in bash with seed_logs.sh sourced, ARGS as its $1, $2, ..."""
    return subprocess.run(["bash", "-c", f'. "{SEED_LOGS}"; {snippet}', "-", *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **(env or {})})


def ask(function: str, run: Path, started: Path) -> subprocess.CompletedProcess:
    return call(f'{function} "$1" "$2"', str(run), str(started))


@pytest.fixture
def started(tmp_path):
    marker = tmp_path / "started"
    marker.touch()
    past = time.time() - 60
    os.utime(marker, (past, past))  # the logs placed after it are newer
    return marker


# returned: 0 for a cause of one moment (run again at once), 2 for one that lasts while the runs beside it step
@pytest.mark.parametrize("recorded, why, returned", [
    (PORT_TAKEN, "the trainer's torch.distributed port was taken before it could bind it (EADDRINUSE)", 0),
    (NO_KV, "vLLM found no KV-cache memory while another run allocated", 0),
    (NO_PORT, "the kernel had no free port to give (a bind to port 0 refused: [Errno 98] Address already in use)", 2),
    (PROFILING, "vLLM's memory profiling saw another run free GPU memory (its engine going to sleep)", 2),
])
def test_a_failure_another_run_caused_is_named(tmp_path, started, recorded, why, returned):
    run = tmp_path / "logs"
    place(run, recorded)
    answer = ask("shared_host_failure", run, started)
    assert answer.returncode == returned, answer.stderr
    assert answer.stdout.strip() == why


def test_a_run_of_its_own_is_not_run_again(tmp_path, started):
    run = tmp_path / "logs"
    place(run, SEED_2)
    answer = ask("shared_host_failure", run, started)
    assert answer.returncode == 1 and answer.stdout == ""
    assert ask("rollout_up", run, started).returncode == 0  # its engine came up


def test_a_log_from_before_the_start_does_not_count(tmp_path, started):
    """A relayed run's folder holds the earlier sitting's console logs: older than this start's marker."""
    run = tmp_path / "logs"
    place(run, PORT_TAKEN)
    past = time.time() - 3600
    for log in run.glob("console-*.log"):
        os.utime(log, (past, past))
    assert ask("shared_host_failure", run, started).returncode == 1
    assert ask("rollout_up", run, started).returncode == 1


def test_the_port_taken_never_brought_the_engine_up(tmp_path, started):
    """The failed start ended before vLLM was up: the stagger let the next run start when it ended."""
    run = tmp_path / "logs"
    place(run, PORT_TAKEN)
    assert ask("rollout_up", run, started).returncode == 1


@pytest.mark.parametrize("entry, parts", [
    ("canary-ppo:1", "canary-ppo 1 -"),
    ("canary-grpo-lora:12", "canary-grpo-lora 12 -"),
    ("canary-ppo:1:frozen-actor", "canary-ppo 1 frozen-actor"),
])
def test_a_runs_entry_is_split_into_recipe_seed_and_control(entry, parts):
    answer = call('run_parts "$1"', entry)
    assert (answer.returncode, answer.stdout.strip()) == (0, parts)


@pytest.mark.parametrize("entry", ["canary-ppo", "canary-ppo:", "canary-ppo:one", ":1", "canary-ppo:1:",
                                   "canary-ppo:1:frozen actor", "canary-ppo:1:a:b"])
def test_a_malformed_runs_entry_is_refused(entry):
    answer = call('run_parts "$1"', entry)
    assert answer.returncode == 1 and answer.stdout == ""


def test_a_control_breaks_the_run_by_its_environment_and_overrides():
    frozen = call('control_env frozen-actor').stdout.split("\n")
    assert frozen[:2] == ["", "actor_rollout_ref.actor.optim.lr=0 trainer.total_training_steps=40"]
    shuffled = call('control_env shuffled', env={"CONTROL_STEPS": "30"}).stdout.split("\n")
    assert shuffled[:2] == ["REWARD_FN=/root/repo/rlrecipes/smoke/shuffled_reward.py",
                            "trainer.total_training_steps=30"]
    assert (REPO / "rlrecipes/smoke/shuffled_reward.py").is_file()  # the path in the repository copied to /root/repo
    assert call('control_env unknown').returncode == 1


def test_the_recorded_control_ran_with_the_overrides_control_env_gives():
    """The frozen-actor control of the PPO seed sitting (CONTROL_STEPS=30): its state names what control_env prints."""
    import json
    state = json.loads((NO_PORT.parent / "reproduce.json").read_text())
    overrides = call('control_env frozen-actor', env={"CONTROL_STEPS": "30"}).stdout.split("\n")[1].split()
    assert state["identity"]["overrides"] == overrides

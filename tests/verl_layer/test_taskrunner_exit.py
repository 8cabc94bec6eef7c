"""Why a finished Hopper-stack run ends with `RuntimeError: DataLoader worker (pid ...) is killed by signal: Killed`
(docs/bench/gpu-reliability.md, "Seen, not explained"), on the real Ray and torchdata of the verl 0.9.1
environment.

verl 0.9.1's `TaskRunnerV1` (a Ray actor, `trainer/main_ppo.py`) keeps its trainer as `self.trainer`; the trainer
keeps the train loader's iterator (`trainer/ppo/v1/trainer_base.py`: `self.train_dataloader_it =
iter(self.train_dataloader)`, a torchdata `StatefulDataLoader` with `data.dataloader_num_workers` processes, 8 by
default), and `fit` returns at the last step with that epoch unfinished, so the worker processes outlive it. When
the driver exits, Ray force-kills the actor, and the exiting core worker first kills every child process of the
actor with SIGKILL. torch's SIGCHLD handler in the actor then raises the RuntimeError above if Python gets to run
it before the process is gone: it did in every verl 0.9.1 launch on record that reached its last step; a race,
so this test reads Ray's own record of the kill (the core worker's log) instead of the traceback.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import textwrap
from pathlib import Path

import pytest

# one xdist worker runs every real Ray cluster (tests/launch/test_cluster_ray.py says why)
pytestmark = [pytest.mark.verl, pytest.mark.xdist_group("ray-cluster")]

DRIVER = textwrap.dedent("""
    import os, sys, ray
    from torchdata.stateful_dataloader import StatefulDataLoader

    class Trainer:  # what TaskRunnerV1.run leaves behind: fit() returned mid-epoch
        train_dataloader_it = None

    @ray.remote
    class TaskRunner:
        def __init__(self):
            self.trainer = None

        def run(self, workers, keep):
            trainer = Trainer()
            if keep:  # verl 0.9.1's TaskRunnerV1: self.trainer; verl 0.5.0's TaskRunner: a local variable
                self.trainer = trainer
            loader = StatefulDataLoader(list(range(4096)), batch_size=8, num_workers=workers, drop_last=True)
            trainer.train_dataloader_it = iter(loader)
            next(trainer.train_dataloader_it)
            return os.getpid(), sorted(w.pid for w in getattr(trainer.train_dataloader_it, "_workers", []))

    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=sys.argv[3])
    runner = TaskRunner.remote()
    pid, workers = ray.get(runner.run.remote(int(sys.argv[1]), sys.argv[2] == "keep"))
    print("RESULT", pid, ",".join(map(str, workers)))
""")


def run_driver(verl_python, workers: int, keep: str) -> tuple[list[int], str]:
    """The driver above with `workers` loader processes, the trainer kept by the actor or not (`keep`, `local`):
    (the loader workers' pids, the actor's core-worker log)."""
    # Ray's socket paths must stay under 108 characters: a short directory of its own, not pytest's tmp_path
    with tempfile.TemporaryDirectory(prefix="rlr-ray-", dir="/tmp") as temp:
        driver = Path(temp) / "driver.py"
        driver.write_text(DRIVER)
        proc = subprocess.run([str(verl_python("0.9.1")), str(driver), str(workers), keep, temp], capture_output=True,
                              text=True, timeout=180, env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})
        result = [line.split() for line in proc.stdout.splitlines() if line.startswith("RESULT")]
        assert proc.returncode == 0 and result, f"the driver failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        actor_pid, pids = result[0][1], [int(p) for p in (result[0][2:] or [""])[0].split(",") if p]
        logs = list(Path(temp).glob(f"session_2*/logs/python-core-worker-*_{actor_pid}.log"))
        assert len(logs) == 1, f"the actor's core-worker log (pid {actor_pid}): found {logs}"
        return pids, logs[0].read_text(errors="replace")


@pytest.mark.parametrize(("workers", "keep"), [(2, "keep"), (0, "keep"), (2, "local")])
def test_ray_kills_the_loader_workers_an_actor_keeps_when_the_driver_exits(verl_python, workers, keep):
    pids, log = run_driver(verl_python, workers, keep)
    killed = re.search(r"Try killing all child processes of this worker as it exits\. Child process pids: ([0-9,]*)",
                       log)
    assert killed, f"no child-process kill in the actor's core-worker log:\n{log[-2000:]}"
    named = sorted(int(p) for p in killed.group(1).split(",") if p)
    assert len(pids) == workers
    if keep == "keep":  # verl 0.9.1: what the actor keeps is there to kill, and Ray kills exactly that
        assert named == pids, f"Ray named {named}, the loader's workers are {pids}"
        for pid in pids:
            assert f"Kill result for child pid {pid}: Success" in log
    else:  # verl 0.5.0: the workers went with run()'s local trainer, before the driver exited
        assert named == [], f"Ray still found {named} (the loader's workers were {pids})"


def test_every_recorded_verl_091_launch_with_loader_workers_ends_with_the_traceback_and_no_other_one_does():
    """docs/bench/gpu-reliability.md's count: the console logs under docs/bench/gpu-data that reached verl's last
    step. verl 0.9.1's lines carry the `TaskRunnerV1` actor's prefix; verl 0.5.0's (the HF-rollout canaries) do
    not, and its `TaskRunner.run` keeps the trainer in a local variable, so the loaders' workers end with `run`.
    A verl 0.9.1 launch with `data.dataloader_num_workers=0` (verl prints its config: the `workers0` lever, on the
    Hopper profiles since, and a launch with the profile as shipped since) has no loader workers to kill, and no
    traceback."""
    records = Path(__file__).resolve().parents[2] / "docs" / "bench" / "gpu-data"
    finished = {"0.9.1": [], "0.9.1 no workers": [], "0.5.0": []}
    for log in sorted(records.rglob("console-*.log")):
        text = log.read_text(errors="replace")
        if "Final validation metrics" not in text:
            continue
        version = "0.9.1" if "(TaskRunnerV1 pid=" in text else "0.5.0"
        if version == "0.9.1" and "'dataloader_num_workers': 0," in text:
            version = "0.9.1 no workers"
        finished[version].append(("DataLoader worker (pid" in text and "is killed by signal: Killed" in text, log))
    assert len(finished["0.9.1"]) == 12 and all(seen for seen, _ in finished["0.9.1"]), finished["0.9.1"]
    # the workers0 lever, the fourth to eighth overhead sittings' launches and the fifth to seventh reliability
    # sittings' launches that reached the last step (the Hopper profile as shipped since), and the GRPO canary's
    # shuffled-reward control beside PPO seed 0 (its console log kept plain: the contract reads it)
    no_workers = finished["0.9.1 no workers"]
    assert [log.relative_to(records).parts[0] for _, log in no_workers] == [
        "canary-seeds-ppo-hopper-h100-3", "recovery-faults-hopper-4", "recovery-faults-hopper-5", "recovery-faults-hopper-6", "startup-levers-h100-3",
        "startup-levers-h100-4", "startup-levers-h100-5", "startup-levers-h100-6", "startup-levers-h100-7",
        "startup-levers-h100-7", "startup-levers-h100-8", "startup-levers-h200"], \
        no_workers
    assert not any(seen for seen, _ in no_workers)
    assert len(finished["0.5.0"]) == 6 and not any(seen for seen, _ in finished["0.5.0"]), finished["0.5.0"]

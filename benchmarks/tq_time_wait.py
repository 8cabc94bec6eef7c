"""How many ports a verl 0.9.1 run's TransferQueue calls leave in TIME_WAIT, on a CPU host: the measurement behind
the port shortage that refused the PPO control's start (docs/bench/gpu-canary.md, "The PPO canary's controls";
the mechanism alone: benchmarks/ports_time_wait.py).

verl 0.9.1's agent loop (verl/trainer/ppo/v1/agent_loop_tq.py) calls, for every prompt of a step,
`tq.async_kv_put(key=uid, partition_id="train", tag={"status": "running"})`, the same with
`{"status": "finished"}` once its rollout.n sessions settle, and for every session
`tq.async_kv_batch_put(keys=[f"{uid}_{session}_0"], fields=..., tags=[...], partition_id="train")`.
This script makes those calls, with the same arguments, against TransferQueue started as verl starts it
(`tq.init()` inside a local Ray), and counts the host's TIME_WAIT sockets (`ss`) before and after each kind, the new ones;
the same interval with no calls is the baseline. Run with the Hopper stack's environment (TransferQueue 0.1.10,
Ray, torch, tensordict), e.g. the verl 0.9.1 venv that `make envs` builds:

    .venvs/verl-0.9.1/bin/python benchmarks/tq_time_wait.py --calls 200

Output recorded in docs/bench/cpu-data/tq-time-wait.txt. A closed connection keeps its port for 60 s on Linux
(TCP_TIMEWAIT_LEN), so a run making C such calls a second holds about 60 x C x (ports per call) of its host's
ephemeral range at any time.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time

from rlrecipes.preflight.host import port_range


def time_wait_sockets() -> set[str]:
    """The host's TIME_WAIT sockets, each as its local and peer address (a socket that expires meanwhile drops out
    of the next set, so new ones are counted as the difference, not by subtracting counts)."""
    out = subprocess.run(["ss", "-Htan", "state", "time-wait"], capture_output=True, text=True, check=True).stdout
    return {" ".join(line.split()[-2:]) for line in out.splitlines()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="calls of each kind (default 200)")
    args = parser.parse_args(argv)
    if args.calls < 1:
        parser.error(f"--calls must be at least 1, not {args.calls}")

    import ray
    import torch
    import transfer_queue as tq
    from tensordict import TensorDict

    from importlib.metadata import version

    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    tq.init()
    ports = port_range()
    where = f"{ports[0]}-{ports[1]} ({ports[1] - ports[0] + 1} ports)" if ports else "not readable"
    print(f"TransferQueue {version('transferqueue')}, Ray {ray.__version__}, torch {torch.__version__}; "
          f"ephemeral range {where}")

    async def kv_put_tags(n: int) -> None:  # agent_loop_tq.py _run_prompt: "running" (then "finished", alike)
        for i in range(n):
            await tq.async_kv_put(key=f"u{i}", partition_id="train", tag={"status": "running"})

    async def kv_batch_put_session(n: int) -> None:  # agent_loop_tq.py _agent_loop_postprocess: one session's output
        for i in range(n):
            prompt, response = torch.randint(0, 100, (40,)), torch.randint(0, 100, (50,))
            fields = TensorDict({"prompts": prompt.unsqueeze(0), "responses": response.unsqueeze(0),
                                 "input_ids": torch.cat([prompt, response]).unsqueeze(0)}, batch_size=[1])
            await tq.async_kv_batch_put(keys=[f"u{i}_0_0"], fields=fields,
                                        tags=[{"status": "success", "prompt_len": 40, "response_len": 50}],
                                        partition_id="train")

    for name, call in (("none (baseline)", None), ("async_kv_put(tag=...)", kv_put_tags),
                       ("async_kv_batch_put(1 row)", kv_batch_put_session)):
        before, t0 = time_wait_sockets(), time.perf_counter()
        if call is None:
            time.sleep(2.0)
        else:
            asyncio.run(call(args.calls))
        seconds = time.perf_counter() - t0
        left = len(time_wait_sockets() - before)
        calls = 0 if call is None else args.calls
        per = f"{left / calls:.2f} per call" if calls else "-"
        print(f"{name:28s} {calls:5d} calls in {seconds:6.2f} s: {left:6d} sockets left in TIME_WAIT ({per}; "
              f"{calls / seconds:.0f} calls/s)")
    tq.close()
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

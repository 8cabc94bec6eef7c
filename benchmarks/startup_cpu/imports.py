"""What the canary's launch imports before its first GPU work, each timed in a fresh interpreter (the CPU side of
docs/bench/gpu-overhead.md). Run it with the Python of the environment to time, e.g. the Hopper image's set
installed by benchmarks/startup_cpu/hopper_env.sh:

    /tmp/hopper-cpu/bin/python benchmarks/startup_cpu/imports.py [REPEATS]

Each probe is one `python -c` that imports its `before` modules (not timed), then its `timed` import, and prints
the seconds the timed import took:
- the driver's vLLM: verl 0.9.1's `validate_config` (verl/utils/config.py) runs in the driver before Ray starts and,
  for a LoRA run with the vLLM rollout, imports `verl.workers.rollout.vllm_rollout.utils` for its LoRA rank check;
  that package's `__init__` imports verl's vLLM server adapter and with it most of vLLM;
- only vLLM's rank list (`vllm.config.lora`, where `MaxLoRARanks` is defined), for comparison;
- a TransferQueue storage actor's import (`transfer_queue.storage.simple_storage`: torch and tensordict), which
  each of verl's 8 storage actors pays in a process of its own.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

PROBES = [
    ("driver: vLLM rollout utils (validate_config's LoRA rank check)",
     ["torch", "verl.utils.config"], "verl.workers.rollout.vllm_rollout.utils"),
    ("driver: vLLM's rank list alone (vllm.config.lora)", ["torch", "verl.utils.config"], "vllm.config.lora"),
    ("driver: torch, then verl.utils.config", [], "torch, verl.utils.config"),
    ("storage actor: transfer_queue.storage.simple_storage", [], "transfer_queue.storage.simple_storage"),
]

CODE = """
import importlib, time
for name in {before!r}:
    importlib.import_module(name)
t = time.perf_counter()
for name in {timed!r}.split(", "):
    importlib.import_module(name)
print(time.perf_counter() - t)
"""


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"REPEATS must be a whole number >= 1, not {text!r}")
    return int(text)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repeats", nargs="?", type=_positive, default=3, metavar="REPEATS",
                        help="fresh interpreters per probe (default 3)")
    repeats = parser.parse_args(argv).repeats
    import importlib.metadata as md

    print(f"python {sys.version.split()[0]}; " + ", ".join(
        f"{p} {md.version(p)}" for p in ("torch", "vllm", "verl", "transferqueue", "tensordict")))
    for label, before, timed in PROBES:
        seconds = []
        for _ in range(repeats):
            out = subprocess.run([sys.executable, "-c", CODE.format(before=before, timed=timed)],
                                 capture_output=True, text=True, check=True).stdout
            seconds.append(float(out.strip().splitlines()[-1]))
        print(f"{label}: median {statistics.median(seconds):.2f} s (min {min(seconds):.2f}, max {max(seconds):.2f},"
              f" {repeats} runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Sample the whole GPU's memory in use (NVML, every process on it: vLLM's engine, verl's workers) and
the utilisation, every INTERVAL seconds, as JSONL {"t", "gpu", "used_mib", "util"} until SIGTERM/SIGINT.

    python3 benchmarks/gpu/gpu_sampler.py OUT.jsonl [--interval 0.2] &

Phase peaks come from joining these samples with the phase marks that benchmarks/gpu/site writes
(RLRECIPES_PHASE_MARKS): benchmarks/gpu/phase_peaks.py. torch's allocator peak misses vLLM's pool and the
CUDA contexts; NVML sees what the card has handed out, which is what runs out.
"""

from __future__ import annotations

import argparse
import json
import signal
import time

import pynvml  # nvidia-ml-py


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--interval", type=float, default=0.2)
    args = parser.parse_args()
    stop = {"now": False}
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.update(now=True))
    pynvml.nvmlInit()
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    with open(args.out, "a", encoding="utf-8", buffering=1) as fh:
        while not stop["now"]:
            now = time.time()
            for index, handle in enumerate(handles):
                used = pynvml.nvmlDeviceGetMemoryInfo(handle).used
                util = pynvml.nvmlDeviceGetUtilizationRates(handle).gpu
                fh.write(json.dumps({"t": round(now, 3), "gpu": index, "used_mib": used // 2**20, "util": util}) + "\n")
            time.sleep(args.interval)
    pynvml.nvmlShutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

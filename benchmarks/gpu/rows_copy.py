#!/usr/bin/env python3
"""GPU host, verl 0.9.1: what verl's FSDP `forward_step` spends before the model's first input is built -- the copy
of one micro batch to the GPU -- for a GSM8K-shaped batch of 128, 256 and 512 rows built by verl's own
`tu.get_tensordict`, with the per-row non-tensor fields a canary batch carries from TransferQueue (the prompt's
messages, reward_model, data_source, extra_info, index, agent_name, tools_kwargs, interaction_kwargs,
extra_fields, multi_modal_inputs, uid). The real `FSDPEngineWithLMHead.forward_step` of the importable verl runs
until it calls `prepare_model_inputs`; the milliseconds from its entry to there are printed, five times a size
(the first includes CUDA's start), with whether the rows-on-host edit (benchmarks/gpu/verl_trial.py) is in.

    python3 benchmarks/gpu/rows_copy.py                                   # verl as installed
    python3 benchmarks/gpu/verl_trial.py rows-on-host && python3 benchmarks/gpu/rows_copy.py   # with the edit

One JSON line: {"edit": bool, "128": [ms, ...], "256": [...], "512": [...]}. Made-up rows, not the product's
batch: the launch's phase times are the measurement, this is the mechanism.
"""

from __future__ import annotations

import json
import time

import torch
import verl.workers.engine.fsdp.transformer_impl as impl
from verl.utils import tensordict_utils as tu


class Reached(Exception):
    pass


class Engine:
    def prepare_model_inputs(self, micro_batch):
        torch.cuda.synchronize()
        raise Reached(time.perf_counter())


def batch(rows: int):
    g = torch.Generator().manual_seed(0)
    lengths = [100 + i % 60 for i in range(rows)]
    return tu.get_tensordict({
        "input_ids": torch.nested.as_nested_tensor([torch.randint(0, 100, (n,), generator=g) for n in lengths],
                                                   layout=torch.jagged),
        "position_ids": torch.nested.as_nested_tensor([torch.arange(n) for n in lengths], layout=torch.jagged),
        "responses": torch.zeros(rows, 64, dtype=torch.long),
        "raw_prompt": [[{"role": "user", "content": "q" * 300}] for _ in range(rows)],
        "reward_model": [{"ground_truth": str(i), "style": "rule"} for i in range(rows)],
        "data_source": ["openai/gsm8k"] * rows, "extra_info": [{"index": i, "split": "train"} for i in range(rows)],
        "index": list(range(rows)), "agent_name": ["single_turn_agent"] * rows,
        "tools_kwargs": [{} for _ in range(rows)], "interaction_kwargs": [{} for _ in range(rows)],
        "extra_fields": [{"turn_scores": [], "min_global_steps": 1} for _ in range(rows)],
        "multi_modal_inputs": [{} for _ in range(rows)], "uid": [f"u{i}" for i in range(rows)],
    }, non_tensor_dict={"temperature": 1.0, "use_remove_padding": True})


def main() -> None:
    with open(impl.__file__, encoding="utf-8") as f:
        out: dict = {"edit": "# rlrecipes: rows-on-host" in f.read()}
    for rows in (128, 256, 512):
        micro_batch, times = batch(rows), []
        for _ in range(5):
            start = time.perf_counter()
            try:
                impl.FSDPEngineWithLMHead.forward_step(Engine(), micro_batch, loss_function=None, forward_only=True)
            except Reached as reached:
                times.append(round((reached.args[0] - start) * 1e3, 2))
        out[str(rows)] = times
    print(json.dumps(out))


if __name__ == "__main__":
    main()

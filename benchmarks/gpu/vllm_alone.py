#!/usr/bin/env python3
"""Standalone vLLM generation rate for the rollout of a recipe: the same model, prompts, batch (prompts x n,
one request per sample as verl's agent loop sends them), lengths (ignore_eos: every response runs to
max_tokens) and engine arguments as verl 0.9.1's vLLM server gets them, with a LoRA adapter of the recipe's
rank active; no verl, no Ray, no HTTP server. The reference for verl's rollout efficiency.

    python3 benchmarks/gpu/vllm_alone.py --model M --data train.parquet --prompts 128 --n 5 --max-tokens 1024 \
        --lora-rank 64 --gpu-memory-utilization 0.6 [--max-num-seqs 256] --out alone.json

--max-num-seqs: verl 0.9.1 passes its rollout.max_num_seqs (default 256); leave it out for vLLM's own
default. The adapter is made on the spot with PEFT (random A and B, so it changes the outputs) in
--adapter (default: beside --out) unless one is there already.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def make_adapter(model_dir: str, out: Path, rank: int, alpha: int) -> float:
    """A PEFT LoRA adapter over every linear layer with random A and B (init_lora_weights=False)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16, device_map="cuda")
    peft_model = get_peft_model(model, LoraConfig(r=rank, lora_alpha=alpha, target_modules="all-linear",
                                                  init_lora_weights=False))
    peft_model.save_pretrained(out)
    del peft_model, model
    torch.cuda.empty_cache()
    return time.perf_counter() - t0


def prompt_ids(model_dir: str, data: str, count: int) -> list[list[int]]:
    """Token ids of the first `count` prompts, through the chat template as verl's RLHFDataset renders them."""
    import pandas as pd
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rows = pd.read_parquet(data)["prompt"].tolist()[:count]
    if len(rows) < count:
        raise SystemExit(f"error: {data} has {len(rows)} prompts, --prompts asks for {count}")
    texts = [tokenizer.apply_chat_template(list(row), add_generation_prompt=True, tokenize=False) for row in rows]
    return [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--prompts", type=int, required=True)
    parser.add_argument("--n", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--lora-rank", type=int, default=64)
    parser.add_argument("--lora-alpha", type=int, default=32)
    parser.add_argument("--adapter", type=Path)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.6)
    parser.add_argument("--max-num-seqs", type=int)
    parser.add_argument("--max-num-batched-tokens", type=int, default=8192)
    parser.add_argument("--enforce-eager", action="store_true")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    result: dict = {"args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}}
    adapter = args.adapter or args.out.with_suffix(".adapter")
    if not (adapter / "adapter_config.json").exists():
        result["adapter_seconds"] = round(make_adapter(args.model, adapter, args.lora_rank, args.lora_alpha), 1)
    ids = prompt_ids(args.model, args.data, args.prompts)
    result["prompt_tokens_mean"] = round(sum(map(len, ids)) / len(ids), 1)

    import vllm
    from vllm import LLM, SamplingParams
    from vllm.lora.request import LoRARequest

    # verl 0.9.1's vllm_async_server.py engine arguments (rollout.yaml defaults), the LoRA ones included
    engine = dict(model=args.model, dtype="bfloat16", load_format="safetensors", seed=42,
                  gpu_memory_utilization=args.gpu_memory_utilization, enable_sleep_mode=True,
                  enable_chunked_prefill=True, max_num_batched_tokens=args.max_num_batched_tokens,
                  enable_prefix_caching=True, enforce_eager=args.enforce_eager, disable_log_stats=True,
                  compilation_config={"cudagraph_mode": "FULL_AND_PIECEWISE"},
                  enable_lora=True, max_loras=1, max_lora_rank=args.lora_rank)
    if args.max_num_seqs:
        engine["max_num_seqs"] = args.max_num_seqs
    t0 = time.perf_counter()
    llm = LLM(**engine)
    result["engine_start_seconds"] = round(time.perf_counter() - t0, 1)
    result["vllm"] = vllm.__version__
    try:
        result["max_num_seqs_effective"] = llm.llm_engine.vllm_config.scheduler_config.max_num_seqs
    except AttributeError as exc:  # a record, not a reason to lose the measurement
        result["max_num_seqs_effective"] = f"unknown: {exc}"
    lora = LoRARequest("bench", 1, str(adapter))
    requests = [{"prompt_token_ids": p} for p in ids for _ in range(args.n)]
    params = SamplingParams(temperature=1.0, max_tokens=args.max_tokens, ignore_eos=True, logprobs=0,
                            detokenize=False, seed=None)
    llm.generate(requests[:8], SamplingParams(max_tokens=16, ignore_eos=True, detokenize=False),
                 lora_request=lora, use_tqdm=False)  # loads the adapter, warms the sampler
    t0 = time.perf_counter()
    outputs = llm.generate(requests, params, lora_request=lora, use_tqdm=False)
    seconds = time.perf_counter() - t0
    tokens = sum(len(o.outputs[0].token_ids) for o in outputs)
    result.update(requests=len(requests), response_tokens=tokens, generate_seconds=round(seconds, 2),
                  tokens_per_s=round(tokens / seconds, 1))
    t0 = time.perf_counter()
    llm.sleep(level=1)
    result["sleep_seconds"] = round(time.perf_counter() - t0, 2)
    t0 = time.perf_counter()
    llm.wake_up()
    result["wake_up_seconds"] = round(time.perf_counter() - t0, 2)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))
    del llm  # shuts the engine core process down; the job script then waits for the GPU to be free
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

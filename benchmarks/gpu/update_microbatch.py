#!/usr/bin/env python3
"""One actor-update micro batch of a LoRA recipe on its real architecture (random weights, no verl): forward
with gradient checkpointing, verl's own log-prob function, backward into the LoRA weights -- in the padded
layout the SDPA profiles use. Seconds and peak allocated memory per micro batch; an estimate of the update
phase is then micro batches x this (verl adds the KL/entropy terms, FSDP and the optimizer step).

Two of the flagship's levers, measured here before a verl launch spends minutes on them:
`--fused-source verl/utils/experimental/torch_functional.py` takes the log-probs as verl's fused kernels (torch
backend, what the Hopper profiles ship) do -- `FusedLinearForPPO` on the last hidden states and the LM head's
weight, 512 tokens at a time, never the whole logits -- and reports its largest difference from the plain path's
log-probs on the same batch; `--no-checkpointing` runs without gradient checkpointing (the forward's activations
kept for the backward instead of recomputed).

    python3 benchmarks/gpu/update_microbatch.py --arch qwen2.5-3b --micro 32 --prompt 64 --response 1024 \
        --pad-to 1536 --lora-rank 64 --verl-source verl/utils/torch_functional.py --out update.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def load_source(path: Path):
    """A verl source file as a module of its own, without importing the verl package (which imports Ray,
    tensordict, ...): verl/utils/experimental/torch_functional.py needs torch only (liger and flash-attn optional)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"verl_source_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    import torch
    from peft import LoraConfig, get_peft_model

    from rlrecipes.plan.architectures import ARCHITECTURES
    from rmpad_attention import padded_batch, random_model, verl_function

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="qwen2.5-3b", choices=sorted(ARCHITECTURES))
    parser.add_argument("--micro", type=int, default=32)
    parser.add_argument("--prompt", type=int, default=64)
    parser.add_argument("--response", type=int, default=1024)
    parser.add_argument("--pad-to", type=int, default=1536)
    parser.add_argument("--lora-rank", type=int, default=64)
    parser.add_argument("--lora-alpha", type=int, default=32)
    parser.add_argument("--attn", default="sdpa")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--verl-source", type=Path, required=True)
    parser.add_argument("--fused-source", type=Path,
                        help="verl's verl/utils/experimental/torch_functional.py: log-probs by its FusedLinearForPPO")
    parser.add_argument("--no-checkpointing", action="store_true", help="no gradient checkpointing")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.reps < 1:
        parser.error(f"--reps {args.reps}: must be at least 1")
    for given in filter(None, (args.verl_source, args.fused_source)):
        if not given.is_file():
            parser.error(f"{given}: no such file (a verl source file, e.g. verl/utils/torch_functional.py)")

    cuda = torch.cuda.is_available()
    model, device = random_model(args.arch, args.attn, args.pad_to)
    dtype = model.dtype
    if not args.no_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    model = get_peft_model(model, LoraConfig(r=args.lora_rank, lora_alpha=args.lora_alpha, target_modules="all-linear"))
    model.train()
    logprobs = verl_function(args.verl_source, "logprobs_from_logits_v2")

    seq = args.prompt + args.response
    ids, mask, pos = padded_batch(torch.randint(0, 1000, (args.micro, seq), device=device), args.pad_to)

    labels = ids[:, -args.response:]

    def plain_logprobs():
        logits = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits[:, -args.response - 1:-1]
        return logprobs(logits, labels)

    if args.fused_source:
        # as verl's forward_with_torch_backend: the base model's hidden states, the LM head's weight, the labels
        fused = load_source(args.fused_source).FusedLinearForPPO(impl_backend="torch")
        causal_lm = model.get_base_model()

        def fused_logprobs():
            hidden = causal_lm.model(input_ids=ids, attention_mask=mask, position_ids=pos).last_hidden_state
            log_probs, _entropy = fused.forward(hidden_states=hidden[:, -args.response - 1:-1],
                                                vocab_weights=causal_lm.lm_head.weight, input_ids=labels)
            return log_probs

        with torch.no_grad():
            fused_diff = round(float((fused_logprobs().float() - plain_logprobs().float()).abs().max()), 5)
    compute = fused_logprobs if args.fused_source else plain_logprobs

    def micro_batch() -> None:
        (-compute().mean()).backward()

    micro_batch()  # warm-up
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(args.reps):
        micro_batch()
    if cuda:
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / args.reps
    result = {"arch": args.arch, "attn": args.attn, "dtype": str(dtype).removeprefix("torch."),
              "gpu": torch.cuda.get_device_name() if cuda else None, "micro": args.micro, "pad_to": args.pad_to,
              "tokens_per_sequence": seq, "lora_rank": args.lora_rank, "gradient_checkpointing": not args.no_checkpointing,
              "log_probs": "fused (FusedLinearForPPO, torch)" if args.fused_source else "logprobs_from_logits_v2",
              "fused_vs_plain_max_abs_diff": fused_diff if args.fused_source else None,
              "fwd_bwd_seconds_per_micro_batch": round(seconds, 3),
              "peak_allocated_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""What `use_remove_padding` costs and computes under each attention implementation, on one micro batch of a
recipe's architecture (random weights, no verl): the packed layout verl's FSDP engine feeds the model when
`actor_rollout_ref.model.use_remove_padding=true` (all sequences of a micro batch in one row, position_ids
restarting per sequence, attention_mask None) against the padded layout it feeds otherwise.

    python3 benchmarks/gpu/rmpad_attention.py --arch qwen2.5-3b --micro 32 --prompt 64 --response 1024 \
        --pad-to 1536 --attn sdpa --out rmpad.json

verl calls the model for a packed micro batch with attention_mask=None, restarting position_ids and
use_cache=False (verl 0.8.0/0.9.1 verl/workers/engine/fsdp/transformer_impl.py `forward_step`); so does this
script. transformers then keeps the sequences apart under SDPA, eager and flex_attention: it derives one mask per
sequence from the restarting position_ids in masking_utils.py `_preprocess_mask_arguments` ->
`find_packed_sequence_indices`, but only `if position_ids is not None and attention_mask is None and
past_key_values is None`. Without use_cache=False the model builds an empty DynamicCache (config.use_cache is
true), the detection is skipped and the row is one causal sequence: every sequence attends to the ones packed
before it. `--use-cache` makes that call, for comparison: the H200 records in docs/bench/gpu-hopper-3b.md
were measured with it, before this script passed use_cache=False. (verl's own patch,
verl/models/transformers/monkey_patch.py, is of the FlashAttention forward only.)
Reports seconds per forward (no grad, bf16 on CUDA; fp32 on CPU) for both layouts, and the largest log-prob
difference of each packed sequence against the same sequence run alone. With --verl-source (verl's
utils/torch_functional.py), also the seconds of verl's own `logprobs_from_logits_v2` -- the path verl takes
when flash-attn's cross-entropy kernel is not installed -- on each layout's logits: it loops over the first
dimension, i.e. over every token of a packed micro batch but over the sequences of a padded one.
With --jitter N every packed call packs responses shortened by up to N tokens, drawn afresh: a packed row of a new
length each call, as verl's micro batches are. A kernel compiled for one shape (flex_attention's, torch.compile's)
then shows what a new shape costs: every call's seconds are reported, the warm-up call included.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def verl_function(source: Path, name: str):
    """One top-level function of a verl source file, compiled from that file's own text (verl's package
    imports Ray, tensordict, ... at import time; the function itself needs torch and F only)."""
    import ast

    import torch
    import torch.nn.functional as F

    tree = ast.parse(source.read_text(), str(source))
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    namespace = {"torch": torch, "F": F}
    exec(compile(ast.Module(body=[node], type_ignores=[]), str(source), "exec"), namespace)
    return namespace[name]


def random_model(arch_name: str, attn: str, max_len: int, layers: int | None = None):
    """A random-weight Qwen2ForCausalLM of a recipe's architecture on the GPU in bf16 (fp32 on a CPU);
    returns (model, device)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from rlrecipes.plan.architectures import ARCHITECTURES

    arch = ARCHITECTURES[arch_name]
    device, dtype = ("cuda", torch.bfloat16) if torch.cuda.is_available() else ("cpu", torch.float32)
    config = Qwen2Config(vocab_size=arch.vocab, hidden_size=arch.hidden, intermediate_size=arch.intermediate,
                         num_hidden_layers=layers or arch.layers, num_attention_heads=arch.heads,
                         num_key_value_heads=arch.kv_heads, max_position_embeddings=max(arch.max_position, max_len),
                         tie_word_embeddings=arch.tie_embeddings)
    config._attn_implementation = attn
    torch.manual_seed(0)
    with torch.device(device):
        return Qwen2ForCausalLM(config).to(dtype), device


def padded_batch(ids, pad_to: int):
    """verl's padded layout: prompts left-padded to max_prompt_length, so every row is pad_to long; returns
    (input_ids, attention_mask, position_ids)."""
    import torch

    left = pad_to - ids.shape[1]
    padded = torch.nn.functional.pad(ids, (left, 0))
    mask = torch.ones_like(padded)
    mask[:, :left] = 0
    return padded, mask, (mask.cumsum(-1) - 1).clamp(min=0)


def main() -> int:
    import torch
    import transformers

    from rlrecipes.plan.architectures import ARCHITECTURES

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="qwen2.5-3b", choices=sorted(ARCHITECTURES))
    parser.add_argument("--layers", type=int, help="fewer layers than the architecture (a quick check)")
    parser.add_argument("--micro", type=int, default=32, help="sequences per micro batch")
    parser.add_argument("--prompt", type=int, default=64, help="real prompt tokens per sequence")
    parser.add_argument("--response", type=int, default=1024)
    parser.add_argument("--pad-to", type=int, default=1536, help="padded length (max_prompt + max_response)")
    parser.add_argument("--attn", default="sdpa")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--use-cache", action="store_true",
                        help="call the model with use_cache=True (transformers' default; not verl's call): the "
                             "packed sequences then attend to each other")
    parser.add_argument("--jitter", type=int, default=0,
                        help="shorten each packed response by up to N tokens, drawn afresh for every call")
    parser.add_argument("--verl-source", type=Path, help="verl's verl/utils/torch_functional.py")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if not 0 <= args.jitter < args.response:
        parser.error(f"--jitter {args.jitter}: must be at least 0 and below --response ({args.response})")
    if args.reps < 1:
        parser.error(f"--reps {args.reps}: must be at least 1")

    cuda = torch.cuda.is_available()
    model, device = random_model(args.arch, args.attn, args.pad_to, args.layers)
    model.eval()
    dtype, config = model.dtype, model.config
    seq = args.prompt + args.response
    ids = torch.randint(0, 1000, (args.micro, seq), device=device)

    def timed(fn, calls: list[float] | None = None):
        """Mean seconds of `reps` calls after a warm-up call; every call's seconds (the warm-up's first) into calls."""
        seconds = []
        for _ in range(args.reps + 1):
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
            out = fn()
            if cuda:
                torch.cuda.synchronize()
            seconds.append(time.perf_counter() - start)
        if calls is not None:
            calls.extend(round(x, 4) for x in seconds)
        return sum(seconds[1:]) / args.reps, out

    # every call as verl's forward_step makes it (use_cache=False), unless --use-cache
    cache = {"use_cache": args.use_cache}
    packed_pos = torch.arange(seq, device=device).repeat(args.micro).unsqueeze(0)
    padded_ids, mask, padded_pos = padded_batch(ids, args.pad_to)

    packed_lengths: list[int] = []  # the packed row's length at each call

    def packed_logits():
        if not args.jitter:
            packed_lengths.append(ids.numel())
            return model(input_ids=ids.reshape(1, -1), attention_mask=None, position_ids=packed_pos, **cache).logits
        lengths = (seq - torch.randint(0, args.jitter + 1, (args.micro,))).tolist()
        packed_lengths.append(sum(lengths))
        row = torch.cat([ids[i, :n] for i, n in enumerate(lengths)]).unsqueeze(0)
        pos = torch.cat([torch.arange(n, device=device) for n in lengths]).unsqueeze(0)
        return model(input_ids=row, attention_mask=None, position_ids=pos, **cache).logits

    def padded_logits():
        return model(input_ids=padded_ids, attention_mask=mask, position_ids=padded_pos, **cache).logits

    with torch.no_grad():
        packed_calls: list[float] = []
        packed_s, _ = timed(packed_logits, packed_calls)
        lengths_timed = list(packed_lengths)
        padded_s, _ = timed(padded_logits)
        # correctness on a few sequences: packed log-probs against each sequence alone
        few = min(4, args.micro)
        alone_pos = torch.arange(seq, device=device).unsqueeze(0)
        alone = torch.cat([model(input_ids=ids[i:i + 1], attention_mask=None, position_ids=alone_pos, **cache)
                           .logits.float().log_softmax(-1) for i in range(few)])
        packed = model(input_ids=ids[:few].reshape(1, -1), attention_mask=None,
                       position_ids=torch.arange(seq, device=device).repeat(few).unsqueeze(0), **cache).logits
        packed = packed.float().log_softmax(-1).reshape(few, seq, -1)
        diffs = [round(float((packed[i] - alone[i]).abs().max()), 4) for i in range(few)]
        del packed, alone
        logprob_s = {}
        if args.verl_source:
            v2 = verl_function(args.verl_source, "logprobs_from_logits_v2")
            for layout, logits_fn in (("packed", lambda: packed_logits().squeeze(0)), ("padded", padded_logits)):
                logits = logits_fn()
                labels = torch.randint(0, 1000, logits.shape[:-1], device=device)
                logprob_s[layout] = round(timed(lambda: v2(logits, labels))[0], 3)
                del logits
    result = {"arch": args.arch, "layers": config.num_hidden_layers, "attn": args.attn, "device": device,
              "dtype": str(dtype).removeprefix("torch."), "transformers": transformers.__version__,
              "torch": torch.__version__, "gpu": torch.cuda.get_device_name() if cuda else None,
              "use_cache": args.use_cache, "micro": args.micro, "tokens_per_sequence": seq, "pad_to": args.pad_to,
              "packed_tokens": args.micro * seq, "padded_tokens": args.micro * args.pad_to,
              "packed_forward_s": round(packed_s, 3), "padded_forward_s": round(padded_s, 3),
              "packed_over_padded": round(packed_s / padded_s, 2),
              "jitter": args.jitter, "packed_calls_s": packed_calls, "packed_row_lengths": lengths_timed,
              "max_abs_logprob_diff_packed_vs_alone": diffs,
              "verl_logprobs_from_logits_v2_s": logprob_s}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

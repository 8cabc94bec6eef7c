"""verl's fused-kernel option on the Hopper stack (verl 0.9.1 + transformers 5.9.0), checked on the CPU.

On the H200 the padded training phases ran ~3x their model compute: without flash-attn's cross-entropy kernel
verl 0.9's engine takes log-probs with `logprobs_from_logits_v2`, a Python loop over every token of the micro
batch (docs/bench/gpu-hopper-3b.md, section 3). verl's own alternative is
`actor_rollout_ref.model.use_fused_kernels=true` + `fused_kernel_options.impl_backend=torch`: log-probs and
entropy from the hidden states in chunks, never the full logits. The H200 profiles ship it since it was measured
there (64 x 5: a step 178 -> 64 s, old log-probs 82.2 -> 17.1 GiB, the same rollout-vs-actor log-prob
difference); this pins that on this stack it computes the same numbers as the plain path for a padded batch
(forward and gradient), through verl's real monkey patch."""

from __future__ import annotations

import json

import pytest

FUSED_VS_PLAIN = r"""
import copy, json, torch, transformers
from transformers import Qwen2Config, Qwen2ForCausalLM
from verl.models.transformers.monkey_patch import apply_monkey_patch
from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits
torch.manual_seed(0)
cfg = Qwen2Config(vocab_size=1024, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=True)
cfg._attn_implementation = "sdpa"
plain = Qwen2ForCausalLM(cfg).float().eval()
fused = copy.deepcopy(plain)
B, L = 4, 96
lens = torch.tensor([96, 80, 64, 50])
mask = (torch.arange(L)[None] < lens[:, None]).long()
ids = torch.randint(3, 1024, (B, L)) * mask            # right-padded, as verl's padded branch feeds the model
pos = (mask.cumsum(-1) - 1).clamp(min=0)
labels = torch.roll(ids, -1, -1)
logits = plain(input_ids=ids, attention_mask=mask, position_ids=pos).logits
lp, ent = logprobs_from_logits(logits, labels), entropy_from_logits(logits)
lp.masked_fill(mask == 0, 0).sum().backward()
grad = plain.model.embed_tokens.weight.grad.clone()
# verl patches the model class's forward (patch_forward_with_backends), so the plain pass has to come first
apply_monkey_patch(fused, use_remove_padding=False, use_fused_kernels=True, fused_kernels_backend="torch")
out = fused(input_ids=ids, attention_mask=mask, position_ids=pos, return_dict=True, temperature=1.0)
out.log_probs.masked_fill(mask == 0, 0).sum().backward()
valid = mask.bool().clone()
valid[torch.arange(B), lens - 1] = False               # the last valid position's label wraps around
print(json.dumps({
    "transformers": transformers.__version__,
    "fused_forward": type(fused).forward.__module__,
    "logp": float((out.log_probs - lp)[valid].abs().max()),
    "entropy": float((out.entropy - ent)[valid].abs().max()),
    "grad": float((fused.model.embed_tokens.weight.grad - grad).norm() / grad.norm()),
    "logp_scale": float(lp[valid].abs().mean()),
}))
"""


# the A100 stack (verl 0.8.0 + transformers 4.57.1) too: its profile does not ship the option (its image has
# flash-attn's cross-entropy for log-probs; docs/bench/gpu-overhead.md, "What carries"), but the numbers hold
@pytest.mark.parametrize(("verl", "transformers"), [("0.9.1", "5.9.0"), ("0.8.0", "4.57.1")])
def test_fused_kernel_forward_matches_the_plain_path_on_a_padded_batch(run_in_verl, verl, transformers):
    proc = run_in_verl(verl, FUSED_VS_PLAIN, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["transformers"] == transformers
    assert result["fused_forward"] == "verl.models.transformers.dense_common"  # the patch took
    assert result["logp_scale"] > 1.0                       # real log-probs, not zeros
    assert result["logp"] < 1e-4 and result["entropy"] < 1e-4, result
    assert result["grad"] < 1e-4, result


@pytest.mark.parametrize("profile", ["h200-141gb", "h200-141gb-2gpu"])
def test_the_hopper_3b_profiles_ship_the_fused_kernels_with_the_torch_backend(profile):
    from rlrecipes.recipe.load import resolve

    run = resolve("qwen2.5-3b-gsm8k-grpo-lora", profile=profile, env={"WANDB_API_KEY": ""})
    assert run.get("actor_rollout_ref.model.use_fused_kernels") is True
    assert run.get("actor_rollout_ref.model.fused_kernel_options.impl_backend") == "torch"
    assert run.get("actor_rollout_ref.model.use_remove_padding") is False
    overrides = run.hydra_overrides()
    assert "actor_rollout_ref.model.use_fused_kernels=true" in overrides
    assert "actor_rollout_ref.model.fused_kernel_options.impl_backend=torch" in overrides
    # a user can still switch them off for one run
    off = resolve("qwen2.5-3b-gsm8k-grpo-lora", profile=profile, env={"WANDB_API_KEY": ""},
                  overrides=["actor_rollout_ref.model.use_fused_kernels=false"])
    assert off.get("actor_rollout_ref.model.use_fused_kernels") is False

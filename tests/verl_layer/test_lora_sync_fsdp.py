"""Why the LoRA adapter reached vLLM empty on the Hopper stack, reproduced on CPU with the real verl 0.9.1
(.venvs/verl-0.9.1: peft 0.21.0, transformers 5.9.0, as docker/hopper.lock pins them).

verl's weight sync collects the adapter with `verl.utils.fsdp_utils.collect_lora_params`, which calls peft's
`get_peft_model_state_dict`. peft 0.21 selects the adapter keys from the module tree
(`_get_tuner_state_dict_key_prefixes`), stripping only a *leading* `_fsdp_wrapped_module.`; under FSDP1 verl
wraps every decoder layer in its own FSDP unit, so the prefixes read `...layers.0._fsdp_wrapped_module.
self_attn.q_proj.lora_A` while the state dict says `...layers.0.self_attn.q_proj.lora_A.default.weight`:
nothing matches, the adapter is empty, and vLLM's `add_lora` dies in `_create_merged_loras_inplace`
(StopIteration on an empty `loras` dict). FSDP2 (`fully_shard`) adds no wrapper modules, so its names match:
the Hopper profiles set `actor_rollout_ref.actor.strategy: fsdp2`. The names FSDP2 sends are the ones
vLLM's `parse_fine_tuned_lora_name` turns into `model.layers.N.<module>` (checked literally below)."""

from __future__ import annotations

import json

import pytest

from rlrecipes.recipe.load import resolve

CODE = r"""
import json, os, sys, torch, torch.distributed as dist
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2], RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
dist.init_process_group("gloo", rank=0, world_size=1)
import peft
from peft import LoraConfig, TaskType, get_peft_model
from transformers import AutoModelForCausalLM, Qwen2Config
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, StateDictType, FullStateDictConfig
from verl.utils.fsdp_utils import apply_fsdp2, collect_lora_params, get_fsdp_wrap_policy

torch.manual_seed(0)
# The smoke model's shape (tied embeddings), 2 layers; LoRA as verl's FSDP engine builds it.
cfg = Qwen2Config(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
model = AutoModelForCausalLM.from_config(cfg)
model.enable_input_require_grads()
model = get_peft_model(model, LoraConfig(task_type=TaskType.CAUSAL_LM, r=8, lora_alpha=16,
                                         target_modules="all-linear", bias="none"))
if sys.argv[1] == "fsdp":  # verl's FSDPEngine._build_fsdp_module, strategy fsdp, one rank
    module = FSDP(model, auto_wrap_policy=get_fsdp_wrap_policy(module=model, config={}, is_lora=True),
                  device_id=torch.device("cpu"), use_orig_params=False)
    FSDP.set_state_dict_type(module, state_dict_type=StateDictType.FULL_STATE_DICT,
                             state_dict_config=FullStateDictConfig())
else:  # strategy fsdp2
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (1,), mesh_dim_names=("fsdp",))
    apply_fsdp2(model, {"mesh": mesh, "reshard_after_forward": True}, {"wrap_policy": {}})
    module = model
adapter = collect_lora_params(module=module, layered_summon=False, base_sync_done=True)
base = collect_lora_params(module=module, layered_summon=False, base_sync_done=False)
print(json.dumps({"peft": peft.__version__, "adapter": sorted(adapter), "base": len(base)}))
"""

PROJECTIONS = ["mlp.down_proj", "mlp.gate_proj", "mlp.up_proj", "self_attn.k_proj", "self_attn.o_proj",
               "self_attn.q_proj", "self_attn.v_proj"]


def collect(run_in_verl, strategy: str, port: int) -> dict:
    result = run_in_verl("0.9.1", f"import sys; sys.argv = ['x', {strategy!r}, {str(port)!r}]\n" + CODE, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.verl
def test_fsdp1_sends_an_empty_adapter_with_peft_021(run_in_verl):
    out = collect(run_in_verl, "fsdp", 29611)
    assert out["peft"].startswith("0.21.")
    assert out["adapter"] == []  # what reached vLLM: add_lora -> StopIteration
    assert out["base"] == 27  # the base-weight sync is unaffected: embed, lm_head, final norm + 2 x 12


@pytest.mark.verl
def test_fsdp2_sends_every_adapter_tensor_named_as_vllm_parses_them(run_in_verl):
    out = collect(run_in_verl, "fsdp2", 29612)
    expected = sorted(f"base_model.model.model.layers.{layer}.{proj}.lora_{ab}.weight"
                      for layer in (0, 1) for proj in PROJECTIONS for ab in "AB")
    assert out["adapter"] == expected  # 2 layers x 7 projections x (A, B); no lm_head (tied, not a target)


@pytest.mark.parametrize("profile", ["any-1gpu-hopper", "h200-141gb", "h200-141gb-2gpu"])
def test_hopper_profiles_train_lora_under_fsdp2(profile):
    run = resolve("qwen2.5-3b-gsm8k-grpo-lora" if profile != "any-1gpu-hopper" else "smoke-grpo-lora",
                  profile=profile)
    assert run.get("actor_rollout_ref.actor.strategy") == "fsdp2"
    assert run.get("critic.strategy") == "fsdp2"

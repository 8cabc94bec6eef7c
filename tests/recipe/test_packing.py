"""`use_remove_padding` (verl's packed micro batches) only with FlashAttention: rlrecipes refuses it on
SDPA/eager models, and the reason is shown on the real transformers of each verl environment -- packed
sequences under SDPA and eager attend to the ones packed before them."""

from __future__ import annotations

import json

import pytest

from rlrecipes.errors import RecipeError
from rlrecipes.recipe.load import resolve

ENV = {"WANDB_API_KEY": ""}
GRPO3B = "qwen2.5-3b-gsm8k-grpo-lora"
RMPAD = "actor_rollout_ref.model.use_remove_padding"
CRITIC_RMPAD = "critic.model.use_remove_padding"


@pytest.mark.parametrize(("recipe", "profile", "overrides", "where"), [
    # the H200 profiles shipped use_remove_padding=true with SDPA until the 3B run on an H200 showed it
    (GRPO3B, "h200-141gb", [f"{RMPAD}=true"], f"command line: {RMPAD}"),
    (GRPO3B, "h200-141gb-2gpu", [f"{RMPAD}=true"], f"command line: {RMPAD}"),
    ("smoke-grpo-lora", "any-1gpu-vllm", [f"{RMPAD}=true"], f"command line: {RMPAD}"),
    ("smoke-grpo-lora", "any-1gpu-hopper", [f"{RMPAD}=true"], f"command line: {RMPAD}"),
    ("smoke-ppo", "any-1gpu", [f"{RMPAD}=true"], f"command line: {RMPAD}"),          # eager (P40 stack)
    # was a preflight failure on the P40 (flash-attn's unpadding kernels need sm_80): now refused at once
    ("qwen2.5-0.5b-gsm8k-ppo", "p40-24gb", [f"{RMPAD}=true"], f"command line: {RMPAD}"),
    ("smoke-ppo", "any-1gpu-vllm", [f"{CRITIC_RMPAD}=true"], f"command line: {CRITIC_RMPAD}"),
    # the profile packs (flash_attention_2) and the command line switches the actor to SDPA
    (GRPO3B, "a100-80gb", ["+actor_rollout_ref.model.override_config.attn_implementation=sdpa"],
     f"recipes/profiles/a100-80gb.yaml: {RMPAD}"),
])
def test_packing_without_flash_attention_is_refused_naming_key_and_source(recipe, profile, overrides, where):
    with pytest.raises(RecipeError) as err:
        resolve(recipe, profile=profile, overrides=overrides, env=ENV)
    assert err.value.where.endswith(where) or where in err.value.where
    assert "needs flash_attention_2" in str(err.value)
    assert "runs sdpa" in str(err.value) or "runs eager" in str(err.value)


@pytest.mark.parametrize(("recipe", "profile", "overrides", "packs"), [
    (GRPO3B, "a100-80gb", [], True),                       # flash_attention_2 + packing, as shipped
    (GRPO3B, "h100-80gb", [], True),
    (GRPO3B, "h200-141gb", [], False),                     # SDPA, padded
    (GRPO3B, "h200-141gb", [f"{RMPAD}=false"], False),
    ("smoke-grpo-lora", "any-1gpu-vllm", [f"{CRITIC_RMPAD}=true"], False),  # no critic: its key is moot
    ("qwen2.5-0.5b-gsm8k-ppo", "p40-24gb", [], False),
    # SDPA profiles that never named the key: verl 0.8.0/0.9.1 would pack by default; rlrecipes pads
    ("smoke-grpo-lora", "any-1gpu-vllm", [], False),
    ("smoke-ppo", "any-1gpu-hopper", [], False),
])
def test_packing_is_allowed_where_attention_keeps_sequences_apart(recipe, profile, overrides, packs):
    run = resolve(recipe, profile=profile, overrides=overrides, env=ENV)
    assert run.get(RMPAD) is packs
    if run.use_critic:
        assert run.get(CRITIC_RMPAD) is packs


def test_the_verl_default_counts_when_no_layer_names_the_key(tmp_path, monkeypatch):
    """A FlashAttention profile that leaves packing to verl's default (true from 0.6 on), switched to SDPA on
    the command line: refused, naming verl's default as the source."""
    import shutil
    from pathlib import Path

    REPO = Path(__file__).resolve().parents[2]
    shutil.copytree(REPO / "recipes", tmp_path / "recipes")
    profile = tmp_path / "recipes" / "profiles" / "a100-80gb.yaml"
    text = profile.read_text()
    assert f"  {RMPAD}: true\n" in text
    profile.write_text(text.replace(f"  {RMPAD}: true\n", ""))
    monkeypatch.setenv("RLRECIPES_HOME", str(tmp_path))
    assert resolve(GRPO3B, profile="a100-80gb", env=ENV).get(RMPAD) is True  # verl 0.8.0's default
    with pytest.raises(RecipeError) as err:
        resolve(GRPO3B, profile="a100-80gb", env=ENV,
                overrides=["+actor_rollout_ref.model.override_config.attn_implementation=sdpa"])
    assert err.value.where == f"verl default: {RMPAD}"


DEFAULTS = r"""
import json, os, verl
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
with initialize_config_dir(config_dir=os.path.join(os.path.dirname(verl.__file__), "trainer", "config"), version_base=None):
    cfg = compose("ppo_trainer", overrides=[])
print(json.dumps({k: OmegaConf.select(cfg, k) for k in ("actor_rollout_ref.model.use_remove_padding",
                                                         "critic.model.use_remove_padding")}))
"""


@pytest.mark.parametrize("version", ["0.5.0", "0.8.0", "0.9.1"])
def test_the_spec_knows_verls_packing_default(run_in_verl, version):
    from rlrecipes.verl.specs import SPECS

    proc = run_in_verl(version, DEFAULTS, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    composed = json.loads(proc.stdout.strip().splitlines()[-1])
    assert composed == {key: SPECS[version].default(key) for key in composed}
    assert composed[RMPAD] is (version != "0.5.0")


def test_no_shipped_profile_packs_without_flash_attention():
    """Every recipe on every profile it lists resolves (the check above runs inside resolve)."""
    from rlrecipes.recipe.load import list_recipes, load_recipe

    checked = 0
    for name in list_recipes():
        for profile in load_recipe(name).profiles:
            run = resolve(name, profile=profile, env=ENV)
            if run.get(RMPAD):
                assert run.profile.attention == "flash_attention_2", (name, profile)
            checked += 1
    assert checked >= 8


PACKED_FORWARD = r"""
import json, torch, transformers
from transformers import Qwen2Config, Qwen2ForCausalLM
torch.manual_seed(0)
out = {"transformers": transformers.__version__}
for impl in ("sdpa", "eager"):
    cfg = Qwen2Config(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    cfg._attn_implementation = impl
    model = Qwen2ForCausalLM(cfg).eval()
    ids = torch.randint(0, 512, (3, 32))
    with torch.no_grad():
        alone = torch.cat([model(input_ids=ids[i:i + 1]).logits for i in range(3)])
        # verl's packed layout (use_remove_padding): one row, position_ids restarting, no attention mask
        packed = model(input_ids=ids.reshape(1, -1), position_ids=torch.arange(32).repeat(3).unsqueeze(0)).logits
    diff = (packed.reshape(3, 32, -1) - alone).abs().amax(dim=(1, 2))
    out[impl] = [float(d) for d in diff]
print(json.dumps(out))
"""


@pytest.mark.parametrize("version", ["0.8.0", "0.9.1"])
def test_packed_sequences_attend_across_under_sdpa_and_eager(run_in_verl, version):
    """The first packed sequence equals its run alone; every later one differs (it saw the earlier ones).
    If a transformers release starts keeping packed sequences apart for SDPA, this fails and the rule in
    rlrecipes/recipe/values.py can be relaxed for that stack."""
    proc = run_in_verl(version, PACKED_FORWARD, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    for impl in ("sdpa", "eager"):
        first, *later = result[impl]
        assert first < 1e-5, (impl, result)
        assert all(d > 1e-2 for d in later), (impl, result)

"""`use_remove_padding` (verl's packed micro batches) only with FlashAttention: rlrecipes refuses it on
SDPA/eager models (rlrecipes/recipe/values.py). The last test shows what transformers itself does with verl's
packed forward on the real transformers of each verl environment: called as verl calls it (use_cache=False),
it keeps the packed sequences apart under sdpa, eager and flex_attention; only with a cache (or without
restarting position_ids) do they attend to the ones packed before them."""

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


# verl's packed (use_remove_padding) forward: verl 0.8.0/0.9.1 `FSDPEngineWithLMHead.forward_step`
# (verl/workers/engine/fsdp/transformer_impl.py) calls `self.module(input_ids=(1, nnz), attention_mask=None,
# position_ids=(1, nnz) restarting at 0 per sequence, use_cache=False)`; 0.5.0's `DataParallelPPOActor`
# (verl/workers/actor/dp_actor.py) the same. transformers keeps such sequences apart in
# masking_utils.py:_preprocess_mask_arguments -> find_packed_sequence_indices, but only
# `if position_ids is not None and attention_mask is None and past_key_values is None`; without
# use_cache=False the model's forward (Qwen2Model.forward: `if use_cache and past_key_values is None`,
# use_cache defaulting to config.use_cache=True) builds an empty DynamicCache first, so the detection is
# skipped and the row is one causal sequence. (transformers 4.56/4.57 add the packed mask for sdpa, eager and
# flex_attention only with torch >= 2.6.)
PACKED_FORWARD = r"""
import json, torch, transformers
from transformers import Qwen2Config, Qwen2ForCausalLM
lengths = (24, 32, 11)
out = {"transformers": transformers.__version__, "torch": torch.__version__}
for impl in ("sdpa", "eager", "flex_attention"):
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    cfg._attn_implementation = impl
    model = Qwen2ForCausalLM(cfg).eval()
    seqs = [torch.randint(0, 512, (1, n)) for n in lengths]
    packed_ids = torch.cat(seqs, dim=1)                                              # (1, nnz)
    calls = {
        "verl": dict(position_ids=torch.cat([torch.arange(n) for n in lengths]).unsqueeze(0), use_cache=False),
        "cache": dict(position_ids=torch.cat([torch.arange(n) for n in lengths]).unsqueeze(0), use_cache=True),
        "contiguous": dict(position_ids=torch.arange(sum(lengths)).unsqueeze(0), use_cache=False),
    }
    try:
        with torch.no_grad():
            alone = [model(input_ids=s, attention_mask=None, position_ids=torch.arange(s.shape[1]).unsqueeze(0),
                           use_cache=False).logits for s in seqs]
            out[impl] = {}
            for name, kw in calls.items():
                packed = model(input_ids=packed_ids, attention_mask=None, **kw).logits.split(lengths, dim=1)
                out[impl][name] = [float((p - a).abs().max()) for p, a in zip(packed, alone)]
    except Exception as exc:  # flex_attention may not run on every CPU torch: the test skips naming the error
        if impl != "flex_attention":
            raise
        out[impl] = {"error": f"{type(exc).__name__}: {exc}"}
print(json.dumps(out))
"""


@pytest.mark.parametrize("version", ["0.5.0", "0.8.0", "0.9.1"])
def test_packed_sequences_stay_apart_in_verls_packed_forward(run_in_verl, version):
    """Sequences of 24, 32 and 11 tokens packed into one row with restarting position_ids, called as verl calls
    the model ("verl"), give the logits each gives alone, under sdpa, eager and flex_attention. Two controls
    show the comparison can fail: with a cache ("cache"), or with position_ids that do not restart
    ("contiguous"), every sequence but the first attends to the ones before it."""
    proc = run_in_verl(version, PACKED_FORWARD, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    for impl in ("sdpa", "eager", "flex_attention"):
        if "error" in result[impl]:
            continue
        assert all(d < 1e-5 for d in result[impl]["verl"]), (impl, result)
        for control in ("cache", "contiguous"):
            first, *later = result[impl][control]
            assert first < 1e-5, (impl, control, result)
            assert all(d > 1e-2 for d in later), (impl, control, result)
    if "error" in result["flex_attention"]:  # after sdpa and eager were checked
        pytest.skip(f"flex_attention on CPU (torch {result['torch']}): {result['flex_attention']['error']}")


@pytest.mark.parametrize("use_cache", [False, True])
def test_the_rmpad_benchmark_calls_the_model_as_verl_does(verl_python, use_cache):
    """benchmarks/gpu/rmpad_attention.py on the CPU, tiny architecture, the Hopper stack's transformers: its
    packed log-probs equal each sequence's alone; with --use-cache (the call its H200 records were measured
    with) every sequence but the first differs."""
    import subprocess
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [str(verl_python("0.9.1")), "benchmarks/gpu/rmpad_attention.py", "--arch", "tiny", "--micro", "4",
         "--prompt", "8", "--response", "40", "--pad-to", "64", "--attn", "sdpa", "--reps", "1",
         *(["--use-cache"] if use_cache else [])],
        capture_output=True, text=True, timeout=300, cwd=repo)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["use_cache"] is use_cache and result["device"] == "cpu"
    first, *later = result["max_abs_logprob_diff_packed_vs_alone"]
    assert first < 1e-3
    assert all((d > 1e-1) if use_cache else (d < 1e-3) for d in later), result


def test_the_rmpad_benchmark_packs_rows_of_a_new_length_each_call_with_jitter(verl_python):
    """--jitter N: every packed call (the warm-up's included) packs responses shortened by up to N tokens, so the
    row's length changes from call to call as verl's micro batches do; each call's seconds are reported; a jitter
    that would leave no response is refused by name."""
    import subprocess
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    base = [str(verl_python("0.9.1")), "benchmarks/gpu/rmpad_attention.py", "--arch", "tiny", "--micro", "4",
            "--prompt", "8", "--response", "40", "--pad-to", "64", "--attn", "sdpa", "--reps", "3"]
    proc = subprocess.run([*base, "--jitter", "16"], capture_output=True, text=True, timeout=300, cwd=repo)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    lengths, calls = result["packed_row_lengths"], result["packed_calls_s"]
    assert len(lengths) == len(calls) == 4 and result["jitter"] == 16
    assert all(4 * (48 - 16) <= n <= 4 * 48 for n in lengths) and len(set(lengths)) > 1, lengths
    assert result["packed_forward_s"] == pytest.approx(sum(calls[1:]) / 3, abs=1e-3)
    assert max(result["max_abs_logprob_diff_packed_vs_alone"]) < 1e-3
    for bad in ("40", "-1"):
        refused = subprocess.run([*base, "--jitter", bad], capture_output=True, text=True, timeout=300, cwd=repo)
        assert refused.returncode == 2 and f"--jitter {bad}: must be at least 0 and below --response (40)" \
            in refused.stderr, refused.stderr

"""Memory planner: each term against its formula worked out by hand with literal numbers
(docs/preflight.md), and the knobs (FSDP sharding, LoRA, offload, checkpointing, dtypes, vLLM share)
moving the right terms."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from rlrecipes.plan.memory import (GIB, MemoryEstimate, Precision, Term, _dtype_name, estimate_memory, host_ram_need,
                                   precision)
from rlrecipes.plan.architectures import ARCHITECTURES, architecture, lora_param_count, param_count
from rlrecipes.plan.plan import checkpoint_bytes
from rlrecipes.preflight.inventory import Gpu
from rlrecipes.recipe.load import resolve

PPO, GRPO = "qwen2.5-0.5b-gsm8k-ppo", "qwen2.5-3b-gsm8k-grpo-lora"
P05 = 494_032_768  # Qwen2.5-0.5B parameters (tied embeddings)
P3 = 3_085_938_688  # Qwen2.5-3B
LORA3_R64 = 119_734_272  # rank 64 on all seven linear projections of the 3B model


_PARSED: dict = {}


@pytest.fixture(autouse=True)
def _parse_each_recipe_file_once(monkeypatch):
    """Speed only: mutation testing runs this file once per mutant, and OmegaConf's parse of the recipe and profile
    files is most of resolve()'s time. Each file is parsed once per session; resolve() gets a fresh copy each call."""
    from rlrecipes.recipe import load

    parse = load._load_yaml

    def parse_once(path):
        try:
            key = (str(path), path.stat().st_mtime_ns)
        except OSError:
            return parse(path)
        if key not in _PARSED:
            _PARSED[key] = parse(path)
        return copy.deepcopy(_PARSED[key])

    monkeypatch.setattr(load, "_load_yaml", parse_once)


def run_of(recipe, profile=None, overrides=(), tmp_path=None):
    env = {"MODELS_DIR": str(tmp_path / "models")} if tmp_path else {"MODELS_DIR": "/nonexistent/models"}
    return resolve(recipe, profile=profile, overrides=list(overrides), env=env)


def term(estimate, phase, name, moment=None):
    terms = estimate.candidates[phase][moment] if moment else estimate.phases[phase]
    matches = [t for t in terms if t.name == name]
    assert len(matches) == 1, (name, [t.name for t in terms])
    return matches[0].bytes


def test_parameter_counts_are_the_published_ones():
    assert param_count(ARCHITECTURES["qwen2.5-0.5b"]) == P05
    assert param_count(ARCHITECTURES["qwen2.5-3b"]) == P3
    assert lora_param_count(ARCHITECTURES["qwen2.5-3b"], 64) == LORA3_R64


def test_p40_ppo_terms_by_hand():
    est = estimate_memory(run_of(PPO))
    assert est.moments == {"rollout": "prefill", "log_prob": "actor old log-prob logits",
                           "update_actor": "backward start", "update_critic": "optimizer step"}
    # FP32 actor on one GPU: 4 B/param weights, 4 B/param gradients, 8 B/param Adam (loaded back from the CPU)
    assert term(est, "update_actor", "actor weights") == P05 * 4
    assert term(est, "update_actor", "actor gradients") == P05 * 4
    assert term(est, "update_actor", "actor Adam state (loaded from CPU)") == P05 * 8
    # ... while the critic waits with its weights only (its Adam state is offloaded)
    assert term(est, "update_actor", "critic weights") == P05 * 4
    assert term(est, "update_actor", "critic Adam state") == 0
    # start of backward: fp32 logits of micro 4 x 1024 tokens x 151936 vocab, and their gradient
    assert term(est, "update_actor", "actor (micro 4) logits") == 4 * 1024 * 151936 * 4
    assert term(est, "update_actor", "actor (micro 4) logits gradient") == 4 * 1024 * 151936 * 4
    # gradient checkpointing keeps one hidden state per layer: 24 x 4 x 1024 x 896 x 4 B
    assert term(est, "update_actor", "actor checkpointed layer inputs (micro 4)") == 24 * 4 * 1024 * 896 * 4
    # the critic peaks at its optimizer step: foreach Adam's parameter-sized fp32 temporary, beside its
    # fp32 weights and gradients and its Adam state loaded back from the CPU
    assert term(est, "update_critic", "critic Adam step temporary") == P05 * 4
    assert term(est, "update_critic", "critic weights") == P05 * 4
    assert term(est, "update_critic", "critic gradients") == P05 * 4
    assert term(est, "update_critic", "critic Adam state (loaded from CPU)") == P05 * 8
    # HF generate, 128 prompts at once; end of decoding: KV = 2 x 24 layers x 2 kv heads x 64 head dim
    # x 4 B x 128 x 1024 tokens = 3 GiB, plus one layer's K/V repeated from 2 to 14 heads
    kv = term(est, "rollout", "KV cache (HF generate, 128 sequences x 1024 tokens)", moment="end of decoding")
    assert kv == 2 * 24 * 2 * 64 * 4 * 128 * 1024 == 3 * GIB
    assert term(est, "rollout", "one layer's K/V repeated to every head", moment="end of decoding") == kv / 24 * 7
    # prefill: the prompt's KV + eager score buffers (3 alive) + Q and K/V repeated to 14 heads + hidden
    assert term(est, "rollout", "KV cache (128 sequences x 512 prompt tokens)") == kv / 2
    assert term(est, "rollout", "prefill attention scores + heads (eager)") == \
        128 * 14 * 512 * 512 * 4 * 3 + 3 * 128 * 14 * 512 * 64 * 4 + 128 * 512 * 896 * 4
    # old log-prob with entropy: logits + softmax and softmax x logits over the 512 response positions
    assert term(est, "log_prob", "actor old log-prob (micro 8) entropy temporaries") == 2 * 8 * 512 * 151936 * 4
    assert est.params["reference"] == "none" and est.params["critic"] is True
    assert est.peak_phase == "update_actor"
    assert 12 < est.total_gib < 24


# Peaks measured on an H200 with the allocator capped at 24 GiB (benchmarks/gpu/memory_fit.py, GPU run 1): the
# P40 recipe as shipped, real 0.5B architecture, worst-case lengths. torch.cuda.max_memory_allocated per
# verl worker call, GiB. The estimate (without its CUDA-context term, which the allocator does not see)
# must stay within 10% of each.
MEASURED_P40 = {"rollout": 11.592, "log_prob": 13.024, "update_actor": 14.297, "update_critic": 11.114}
# GPU run 3: the A100 recipe's training side on one H200 capped at 80 GiB -- 3B architecture, LoRA 64,
# verl 0.5.0 with HF rollout (fp32 storage, bf16 mixed precision, SDPA, no flash-attn), micro batches 32,
# 32 prompts x 5. These overrides are the ones benchmarks/gpu/a100_3b_training_side.sh passed.
FIT_3B = ["+actor_rollout_ref.model.override_config._attn_implementation=sdpa",
          "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=32",
          "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=32",
          "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=32",
          "actor_rollout_ref.model.enable_gradient_checkpointing=true",
          "+actor_rollout_ref.actor.fsdp_config.mixed_precision={param_dtype:bf16,reduce_dtype:fp32,buffer_dtype:fp32}",
          "+actor_rollout_ref.ref.fsdp_config.model_dtype=bf16", "data.train_batch_size=32",
          "actor_rollout_ref.actor.ppo_mini_batch_size=32"]
MEASURED_3B = {"rollout": 33.657, "log_prob": 44.441, "update_actor": 59.375}


@pytest.mark.parametrize("recipe,profile,overrides,measured,phase", [
    *[(PPO, None, [], MEASURED_P40, p) for p in sorted(MEASURED_P40)],
    *[(GRPO, "any-1gpu", FIT_3B, MEASURED_3B, p) for p in sorted(MEASURED_3B)],
])
def test_estimate_matches_measured_peaks(recipe, profile, overrides, measured, phase):
    est = estimate_memory(run_of(recipe, profile, overrides))
    ratio = (est.phase_gib(phase) - 0.5) / measured[phase]
    assert 0.9 <= ratio <= 1.1, (phase, ratio)


def test_bf16_log_softmax_rows_without_flash_attn():
    """verl 0.5.0 without flash-attn takes a bf16 log_softmax per row; autograd keeps every row."""
    est = estimate_memory(run_of(GRPO, "any-1gpu", FIT_3B))
    assert term(est, "update_actor", "actor (micro 32) log-softmax rows kept for backward") == 32 * 1024 * 151936 * 2
    with_flash = estimate_memory(run_of(GRPO))  # a100 image: flash-attn's cross-entropy keeps nothing extra
    assert not any("log-softmax" in t.name for t in with_flash.phases["update_actor"])


def test_grpo_lora_on_a100_terms_by_hand():
    est = estimate_memory(run_of(GRPO))
    # FSDP over 4 GPUs: base + adapter in fp32, a quarter each; gradients and Adam for the adapter only
    assert term(est, "update_actor", "actor weights") == (P3 + LORA3_R64) * 4 / 4
    assert term(est, "update_actor", "actor gradients (LoRA)") == LORA3_R64 * 4 / 4
    assert term(est, "update_actor", "actor Adam state (LoRA)") == LORA3_R64 * 8 / 4
    # LoRA: the reference policy is the actor without its adapter -- no separate weights
    assert est.params["reference"] == "actor without adapter"
    assert not any("reference" in t.name for p in est.phases.values() for t in p)
    # vLLM holds gpu_memory_utilization x 80 GiB while generating
    assert term(est, "rollout", "vllm gpu_memory_utilization 0.8 x 80 GiB (weights/TP1, KV cache, graphs)") == 64 * GIB
    assert est.engine_share_gib == 64
    # bf16 logits of micro 32 x 1536 tokens and their gradient at the start of backward
    assert term(est, "update_actor", "actor (micro 32) logits") == 32 * 1536 * 151936 * 2
    assert term(est, "update_actor", "actor (micro 32) logits gradient") == 32 * 1536 * 151936 * 2
    assert est.total_gib < 80


@pytest.mark.parametrize("gpus,expected_share", [(4, 1 / 4), (2, 1 / 2), (1, 1.0)])
def test_fsdp_shards_over_data_parallel_gpus(gpus, expected_share):
    est = estimate_memory(run_of(GRPO, overrides=[f"trainer.n_gpus_per_node={gpus}"]))
    assert term(est, "update_actor", "actor weights") == pytest.approx((P3 + LORA3_R64) * 4 * expected_share)


def test_full_fine_tune_trains_every_parameter():
    est = estimate_memory(run_of(GRPO, overrides=["actor_rollout_ref.model.lora_rank=0"]))
    assert term(est, "update_actor", "actor Adam state") == P3 * 8 / 4
    assert term(est, "update_actor", "actor gradients") == P3 * 4 / 4
    # a separate reference model now, bf16 by default (verl loads non-actor models in bf16)
    assert term(est, "rollout", "reference weights") == P3 * 2 / 4
    assert est.params["reference"] == "separate"


@pytest.mark.parametrize("overrides,expected", [
    ([], P3 * 2 / 4),  # bf16 by default for the reference (verl loads non-actor models in bf16)
    (["+actor_rollout_ref.ref.fsdp_config.model_dtype=fp32"], P3 * 4 / 4),
    (["actor_rollout_ref.ref.fsdp_config.param_offload=true"], 0),
])
def test_reference_dtype_and_offload(overrides, expected):
    est = estimate_memory(run_of(GRPO, overrides=["actor_rollout_ref.model.lora_rank=0", *overrides]))
    assert term(est, "rollout", "reference weights") == expected


def test_optimizer_offload_frees_rollout_but_not_update():
    on = estimate_memory(run_of(PPO))  # the P40 profile offloads both optimizers
    off = estimate_memory(run_of(PPO, overrides=["actor_rollout_ref.actor.fsdp_config.optimizer_offload=false",
                                                 "critic.model.fsdp_config.optimizer_offload=false"]))
    assert term(on, "rollout", "actor Adam state") == 0
    assert term(off, "rollout", "actor Adam state") == P05 * 8
    assert term(on, "update_actor", "actor Adam state (loaded from CPU)") == term(off, "update_actor", "actor Adam state")
    # during the actor's update only the critic's Adam state differs (resident vs on the CPU)
    assert off.phase_gib("update_actor") - on.phase_gib("update_actor") == pytest.approx(P05 * 8 / GIB)
    assert off.phase_gib("rollout") - on.phase_gib("rollout") == pytest.approx(2 * P05 * 8 / GIB)


def test_gradient_checkpointing_trades_activations():
    with_gc = estimate_memory(run_of(PPO))
    without = estimate_memory(run_of(PPO, overrides=["actor_rollout_ref.model.enable_gradient_checkpointing=false"]))
    layer = term(with_gc, "update_actor", "actor recomputed layer (micro 4)", moment="layer recompute")
    assert term(without, "update_actor", "actor activations of 24 layers (micro 4, no checkpointing)",
                moment="backward start") == 24 * layer
    assert without.phase_gib("update_actor") > with_gc.phase_gib("update_actor") + 10


NO_GC = ["actor_rollout_ref.model.enable_gradient_checkpointing=false",
         "critic.model.enable_gradient_checkpointing=false"]


def test_activations_without_checkpointing_by_hand():
    """The P40 recipe with gradient checkpointing off: every term of the actor's update by hand.

    Qwen2.5-0.5B: L=24 layers, h=896, I=4864, 14 heads; FP32 compute (4 B); micro batch b=4 of
    s=512+512=1024 tokens; eager attention.
    Per layer (Korthikanti et al. 2022, SwiGLU, no dropout): (17h + 8I) values per token in 16-bit terms,
        (17*896 + 8*4864) * 4/2 B = 54144 * 2 = 108288 B per token, x 4*1024 tokens = 443,547,648 B
    eager attention scores before and after softmax: b * heads * s^2 * 4 B * 2
        = 4 * 14 * 1024^2 * 8 = 469,762,048 B
    one layer = 913,309,696 B; all 24 layers = 21,919,432,704 B = 20.414 GiB.
    The peak is the start of backward: those activations + fp32 logits and their gradient
    (2 x 4*1024*151936*4 = 4,978,638,848 B) + the actor's weights, gradients, Adam state
    (494,032,768 x (4+4+8) = 7,904,524,288 B) + the critic's fp32 weights (1,976,131,072 B; its Adam
    state is offloaded) + 0.5 GiB context = 37,315,597,824 B = 34.7529 GiB.
    """
    est = estimate_memory(run_of(PPO, overrides=NO_GC))
    layer = (17 * 896 + 8 * 4864) * 4 // 2 * (4 * 1024) + 4 * 14 * 1024 ** 2 * 4 * 2
    assert layer == 913_309_696
    assert term(est, "update_actor", "actor activations of 24 layers (micro 4, no checkpointing)",
                moment="backward start") == 24 * layer == 21_919_432_704
    assert term(est, "update_critic", "critic activations of 24 layers (micro 4, no checkpointing)",
                moment="backward start") == 24 * layer
    assert est.moments["update_actor"] == "backward start"
    total = 24 * layer + 2 * 4 * 1024 * 151936 * 4 + P05 * (4 + 4 + 8) + P05 * 4 + GIB // 2
    assert total == 37_315_597_824
    assert est.phase_gib("update_actor") * GIB == pytest.approx(total, rel=1e-12)
    assert round(est.phase_gib("update_actor"), 2) == 34.75


def test_forward_only_layer_by_hand():
    """Without autograd only the live tensors of one layer count: (4h + 3I) values per token.
    Old log-probs of the P40 recipe: micro 8 x 1024 tokens, fp32, eager:
    (4*896 + 3*4864) * 4 B * 8192 = 595,591,168 B + scores 8 * 14 * 1024^2 * 4 B * 2 = 939,524,096 B."""
    est = estimate_memory(run_of(PPO))
    assert term(est, "log_prob", "actor old log-prob layer (micro 8)", moment="actor old log-prob layer") == \
        (4 * 896 + 3 * 4864) * 4 * 8192 + 8 * 14 * 1024 ** 2 * 4 * 2 == 1_535_115_264


def test_checkpointed_recompute_layer_by_hand():
    """With checkpointing: one layer recomputed (the same 913,309,696 B as above) beside the kept
    layer inputs, 24 x 4*1024 tokens x 896 x 4 B = 352,321,536 B."""
    est = estimate_memory(run_of(PPO))
    assert term(est, "update_actor", "actor recomputed layer (micro 4)", moment="layer recompute") == 913_309_696
    assert term(est, "update_actor", "actor checkpointed layer inputs (micro 4)",
                moment="layer recompute") == 352_321_536


def test_micro_batch_scales_logits_linearly():
    small = estimate_memory(run_of(PPO, overrides=["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2"]))
    big = estimate_memory(run_of(PPO, overrides=["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8"]))
    assert term(big, "update_actor", "actor (micro 8) logits", moment="backward start") == \
        4 * term(small, "update_actor", "actor (micro 2) logits", moment="backward start")


def test_entropy_coefficient_keeps_entropy_temporaries_for_backward():
    est = estimate_memory(run_of(PPO, overrides=["actor_rollout_ref.actor.entropy_coeff=0.01"]))
    assert term(est, "update_actor", "actor (micro 4) entropy temporaries") == 2 * 4 * 512 * 151936 * 4


def test_hf_rollout_micro_batch_chunks_generation():
    est = estimate_memory(run_of(PPO, overrides=["+actor_rollout_ref.rollout.micro_batch_size=16"]))
    assert term(est, "rollout", "KV cache (HF generate, 16 sequences x 1024 tokens)",
                moment="end of decoding") == 3 * GIB / 8


def test_inventory_gpu_sets_the_vllm_share():
    est = estimate_memory(run_of(GRPO), inventory_gpu=Gpu(0, "NVIDIA A100-SXM4-40GB", 40960, "8.0"))
    assert est.gpu_memory_gib == 40 and est.engine_share_gib == pytest.approx(32)


def test_model_config_json_overrides_the_table(tmp_path):
    import json

    model = tmp_path / "models" / "Qwen2.5-0.5B-Instruct"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({
        "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 1000, "tie_word_embeddings": True}))
    est = estimate_memory(run_of(PPO, tmp_path=tmp_path))
    assert est.params["params"] == param_count(ARCHITECTURES["tiny"].__class__(
        "x", None, 2, 64, 128, 4, 2, 1000, True))
    assert est.params["sequence_tokens"] == 1024
    assert est.total_gib < estimate_memory(run_of(PPO)).total_gib / 5  # the tiny config, not the table's 0.5B


def unknown_model_run(tmp_path):
    """A recipe whose model has no table entry, no config.json and no offline builder."""
    run = resolve("qwen2.5-0.5b-gsm8k-ppo", env={"MODELS_DIR": str(tmp_path)})
    model = dataclasses.replace(run.recipe.model, hub_id="example/unknown-7b")
    return dataclasses.replace(run, recipe=dataclasses.replace(run.recipe, model=model))


def test_unknown_model_is_reported_not_guessed(tmp_path):
    run = unknown_model_run(tmp_path)
    est = estimate_memory(run)
    assert est.known is False and est.phases == {} and "unknown architecture" in est.notes[0]
    assert est.as_dict()["total_gib"] == 0


@pytest.mark.parametrize("overrides,key,expected", [
    (["+a.b={c: 1, d: 2}"], "a.b.c", 1),
    (["+a.b={c: 1, d: 2}", "+a.b.c=5"], "a.b.c", 5),
    (["+a.b.c=5", "+a.b={c: 1}"], "a.b.c", 1),
    (["+a.b={c: 1}"], "a.b.x", None),
    (["+a.b={c: 1}", "~a.b"], "a.b.c", None),
])
def test_get_last_override_wins(overrides, key, expected):
    """ResolvedRun.get, the one accessor the planner reads the config through: parents given as mappings
    and children given on their own, the last override that sets a key wins."""
    run = resolve(PPO, overrides=overrides, env={})
    assert run.get(key) == expected


def test_get_falls_back_to_this_verls_default_and_converts():
    run = resolve(PPO, overrides=["actor_rollout_ref.rollout.n=3", "+a.b={c: '7'}"], env={})
    assert run.get("actor_rollout_ref.rollout.n", kind=int) == 3
    assert run.get("a.b.c", kind=int) == 7 and run.get("a.b.c") == "7"
    assert run.get("actor_rollout_ref.actor.ppo_epochs") == run.image.spec.defaults["actor_rollout_ref.actor.ppo_epochs"]
    assert run.get("actor_rollout_ref.actor.ppo_epochs", 4) == 4  # an explicit default wins over verl's
    assert run.get("a.b.nope") is None and run.get("a.b.nope", 0, kind=int) == 0


@pytest.mark.parametrize("recipe,profile,overrides,expected", [
    (PPO, None, [], {"actor": "fp32", "rollout": "fp32", "critic": "fp32"}),
    (PPO, None, ["+actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=bf16"],
     {"actor": "bf16", "rollout": "fp32", "critic": "fp32"}),  # HF generate uses the fp32 storage
    (GRPO, None, [], {"actor": "bf16", "rollout": "bf16"}),
    (GRPO, None, ["actor_rollout_ref.rollout.dtype=float16"], {"actor": "bf16", "rollout": "fp16"}),
])
def test_precision_from_final_overrides(recipe, profile, overrides, expected):
    run = run_of(recipe, profile, overrides)
    used = precision(run).used(run.use_critic, run.use_reference_policy and not run.lora_rank)
    assert used == expected


def test_plan_carries_the_estimate():
    from rlrecipes.plan.plan import build_plan

    run = run_of(PPO)
    plan = build_plan(run)
    est = estimate_memory(run)
    assert plan.memory.total_gib == est.total_gib
    mem = plan.as_dict()["memory"]  # what `plan --json` prints
    assert mem["total_gib"] == round(est.total_gib, 3)
    assert mem["terms"][0] == {"name": est.terms[0].name, "gib": round(est.terms[0].gib, 3)}
    gibs = [t["gib"] for t in mem["terms"]]
    assert gibs == sorted(gibs, reverse=True)


def test_as_dict_is_the_estimate_rounded_to_mib():
    """`rlrecipes plan --json`'s memory block: the P40 recipe without checkpointing (34.7529 GiB by hand
    in test_activations_without_checkpointing_by_hand), every key literal, figures rounded to 3 decimals."""
    est = estimate_memory(run_of(PPO, overrides=NO_GC))
    d = est.as_dict()
    assert set(d) == {"total_gib", "gpu_memory_gib", "peak_phase", "terms", "peak_moment", "phases",
                      "engine_share_gib", "resident_at_rollout_gib", "params", "notes", "known"}
    assert (d["total_gib"], d["gpu_memory_gib"], d["peak_phase"], d["peak_moment"]) == \
        (34.753, 24.0, "update_actor", "backward start")
    assert d["terms"][0] == {"name": "actor activations of 24 layers (micro 4, no checkpointing)", "gib": 20.414}
    assert [t["name"] for t in d["terms"]] == [t.name for t in est.terms]
    assert set(d["phases"]) == {"rollout", "log_prob", "update_actor", "update_critic"}
    actor = d["phases"]["update_actor"]
    assert (actor["total_gib"], actor["moment"]) == (34.753, "backward start")
    assert {"name": "actor gradients", "gib": 1.84} in actor["terms"]  # 494,032,768 x 4 B = 1.8404 GiB
    assert all(t["gib"] > 0 for p in d["phases"].values() for t in p["terms"])  # zero terms are left out
    assert (d["engine_share_gib"], d["resident_at_rollout_gib"]) == (None, None)  # HF rollout: no engine share
    assert d["known"] is True and d["params"]["params"] == P05 and d["notes"] == est.notes
    grpo = estimate_memory(run_of(GRPO)).as_dict()
    assert grpo["engine_share_gib"] == 64.0
    assert grpo["resident_at_rollout_gib"] == round(estimate_memory(run_of(GRPO)).resident_at_rollout_gib, 3)


def test_fsdp_shards_over_every_node():
    est = estimate_memory(run_of(GRPO, overrides=["trainer.nnodes=2"]))  # 4 GPUs x 2 nodes
    assert term(est, "update_actor", "actor weights") == pytest.approx((P3 + LORA3_R64) * 4 / 8)
    assert est.params["n_gpus"] == 8


def test_sdpa_layer_has_no_score_matrices():
    """Without eager attention the recomputed layer is the per-token term alone: 3B, micro 32 x 1536
    tokens (512 prompt + 1024 response), bf16: (17*2048 + 8*11008) * 2/2 B * 49152 = 6,039,797,760 B."""
    est = estimate_memory(run_of(GRPO, "any-1gpu", FIT_3B))
    assert term(est, "update_actor", "actor recomputed layer (micro 32)", moment="layer recompute") == \
        (17 * 2048 + 8 * 11008) * 32 * 1536 == 6_039_797_760


UNFUSED = ["actor_rollout_ref.model.use_fused_kernels=false"]


def test_verl_09_engine_without_flash_attn_reproduces_the_h200_measurement():
    """verl 0.9.1 on one H200, 3B GRPO-LoRA without fused kernels, micro batch 32, prompts of ~64 tokens
    (sequences ~1,090 tokens): verl's own allocator peak was 82.2 GiB at 128 x 5 and again at 64 x 5
    (docs/bench/gpu-hopper-3b.md). The old-log-prob moment -- logits plus the entropy's fp32 softmax and
    logsumexp temporaries over every padded position -- gives the same at those lengths; at the recipe's
    maximum lengths it is the peak phase."""
    short = estimate_memory(resolve("qwen2.5-3b-gsm8k-grpo-lora", profile="h200-141gb",
                                    overrides=[*UNFUSED, "data.max_prompt_length=66"]))
    assert short.phase_gib("log_prob") == pytest.approx(82.2, rel=0.02)
    names = " ".join(t.name for t in short.phases["log_prob"])
    assert "fp32 softmax over every padded position" in names and "logsumexp" in names
    unfused = estimate_memory(resolve("qwen2.5-3b-gsm8k-grpo-lora", profile="h200-141gb", overrides=UNFUSED))
    assert unfused.peak_phase == "log_prob" and unfused.total_gib == pytest.approx(110.7, abs=0.1)
    # the update holds the unpadded copy, the per-token log-softmax kept for backward and the gradient
    update = " ".join(t.name for t in unfused.phases["update_actor"])
    assert "unpadded copy" in update and "per-token log-softmax kept for backward (fp32)" in update


def test_fused_kernels_take_the_full_logits_out_of_the_verl_09_estimate():
    """The profile ships verl's fused kernels (torch backend). Measured on one H200 at 64 x 5 with prompts of
    ~64 tokens: old log-probs 17.1 GiB, actor update 24.8 GiB allocated. The planner at the recipe's maximum
    prompt length gives 17.1 and 26.2 (the figures plan shows beside the measurement); at the measured lengths
    16.0 and 22.6, 6-9% under -- recorded in docs/bench/gpu-hopper-3b.md, not tuned away."""
    plain = estimate_memory(resolve("qwen2.5-3b-gsm8k-grpo-lora", profile="h200-141gb", overrides=UNFUSED))
    fused = estimate_memory(resolve("qwen2.5-3b-gsm8k-grpo-lora", profile="h200-141gb"))
    assert fused.phase_gib("log_prob") < plain.phase_gib("log_prob") - 90
    considered = [t.name for terms in fused.candidates["log_prob"].values() for t in terms]
    assert any("fused log-prob/entropy chunk (512 tokens" in name for name in considered)
    assert fused.peak_phase == "rollout"
    assert fused.phase_gib("log_prob") == pytest.approx(17.1, abs=0.1)
    assert fused.phase_gib("update_actor") == pytest.approx(24.8, rel=0.06)
    short = estimate_memory(resolve("qwen2.5-3b-gsm8k-grpo-lora", profile="h200-141gb",
                                    overrides=["data.max_prompt_length=66"]))
    assert short.phase_gib("log_prob") == pytest.approx(17.1, rel=0.07)
    assert short.phase_gib("update_actor") == pytest.approx(24.8, rel=0.1)


def test_flash_attn_images_keep_their_logits_terms():
    """The A100 image (verl 0.8.0, flash-attn's cross-entropy) is not verl 0.9's padded path."""
    run = resolve("qwen2.5-3b-gsm8k-grpo-lora", profile="a100-80gb")
    names = " ".join(t.name for terms in estimate_memory(run).phases.values() for t in terms)
    assert "padded position" not in names and "unpadded copy" not in names


# ---------------------------------------------------------------------------------------------------------------
# Every term of every moment for a tiny literal architecture (config.json in MODELS_DIR), figures by hand.
#   L = 2 layers, h = 8, I = 24, 4 heads of head_dim 2, 2 KV heads, vocab V = 10, tied embeddings
#   parameters per layer: q 8x8 + 8 bias, k 8x4 + 4, v 8x4 + 4, o 8x8, gate 8x24, up 8x24, down 24x8, 2 norms x 8
#     = 72 + 36 + 36 + 64 + 192 + 192 + 192 + 16 = 800; x 2 layers + embedding 10 x 8 + final norm 8 = 1688
TINY = {"num_hidden_layers": 2, "hidden_size": 8, "intermediate_size": 24, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 10, "tie_word_embeddings": True}
TINY_PARAMS = 1688
CTX = ("CUDA context + allocator", 2 ** 29)  # 0.5 GiB
SHORT = ["data.max_prompt_length=3", "data.max_response_length=5", "data.train_batch_size=6"]  # s = 8 tokens


@pytest.fixture
def tiny(tmp_path):
    """resolve(recipe, profile, overrides) against a models dir holding the tiny config (or `config`)."""
    def make(recipe, profile=None, overrides=(), config=TINY):
        for name in ("Qwen2.5-0.5B-Instruct", "Qwen2.5-3B-Instruct"):
            (tmp_path / "models" / name).mkdir(parents=True, exist_ok=True)
            (tmp_path / "models" / name / "config.json").write_text(json.dumps(config))
        return run_of(recipe, profile, overrides, tmp_path)
    return make


def moments_of(est):
    """phase -> moment -> [(term, bytes)] as the estimate weighed them (the rollout of vLLM: its one moment)."""
    out = {p: {m: [(t.name, t.bytes) for t in terms] for m, terms in ms.items()} for p, ms in est.candidates.items()}
    for phase, terms in est.phases.items():
        if phase not in est.candidates:
            out[phase] = {est.moments[phase]: [(t.name, t.bytes) for t in terms]}
    return out


def test_tiny_config_parameters():
    assert param_count(ARCHITECTURES["tiny"].__class__("x", None, 2, 8, 24, 4, 2, 10, True)) == TINY_PARAMS


def test_tiny_p40_ppo_every_term_by_hand(tiny):
    """P40 PPO as shipped (1 GPU, fp32 = 4 B everywhere, eager, checkpointing, optimizers offloaded, HF generate,
    no reference) with prompt 3 + response 5 = 8 tokens, 6 prompts x 1 response; micro 4 / log-prob 8 / critic 4.
    Weights 1688 x 4 = 6752, gradients 6752, Adam 1688 x 8 = 13504 (on the CPU between updates).
    Rollout, g = 6 sequences, KV per token 2 x L x kv 2 x head_dim 2 x 4 B x 6 = 384:
      prefill: KV 384 x 3 = 1152; attention 6x4x3x3 x 4 B x 3 (scores) + 3 x 6x4x3x2 x 4 B = 2592 + 1728 = 4320
               < MLP 3 x 6x3x24 x 4 B = 5184, + hidden 6x3x8 x 4 B = 576 -> 5760;  1152 + 5760 = 6912
      end:     KV 384 x 8 = 3072; one layer's K/V to 4 heads 3072 / 2 x 4 / 2 = 3072; logits 6 x 10 x 4 x 3 = 720
               -> 6864 < 6912: prefill is the peak
    Old log-probs, micro 8 x 8 = 64 tokens: logits 64 x 10 x 4 = 2560, entropy 2 x 8 x 5 x 10 x 4 = 3200 (5760)
      < live layer (4h + 3I) x 4 = 416 B x 64 = 26624 + scores 8x4x8x8 x 4 x 2 = 16384 -> 43008
    Update, micro 4 x 8 = 32 tokens: kept inputs L x 32 x 8 x 4 = 2048; recomputed layer (17h + 8I) x 4/2 = 656 B
      x 32 = 20992 + scores 4x4x8x8 x 4 x 2 = 8192 -> 29184; logits 4 x 8 x 10 x 4 = 1280 and its gradient;
      foreach Adam temporary 1688 x 4 = 6752.  backward start 2048 + 2560 = 4608 < recompute 2048 + 29184."""
    est = estimate_memory(tiny(PPO, overrides=SHORT))
    resident = [("actor weights", 6752), ("actor Adam state", 0), ("critic weights", 6752), ("critic Adam state", 0),
                CTX]
    actor = [("critic weights", 6752), ("critic Adam state", 0), CTX, ("actor weights", 6752),
             ("actor gradients", 6752), ("actor Adam state (loaded from CPU)", 13504)]
    critic = [("actor weights", 6752), ("actor Adam state", 0), CTX, ("critic weights", 6752),
              ("critic gradients", 6752), ("critic Adam state (loaded from CPU)", 13504)]
    assert moments_of(est) == {
        "rollout": {
            "prefill": [*resident, ("KV cache (6 sequences x 3 prompt tokens)", 1152),
                        ("prefill MLP activations", 5760)],
            "end of decoding": [*resident, ("KV cache (HF generate, 6 sequences x 8 tokens)", 3072),
                                ("one layer's K/V repeated to every head", 3072),
                                ("sampling logits (last token, fp32)", 720)]},
        "log_prob": {
            "actor old log-prob logits": [*resident, ("actor old log-prob (micro 8) logits", 2560),
                                          ("actor old log-prob (micro 8) entropy temporaries", 3200)],
            "actor old log-prob layer": [*resident, ("actor old log-prob layer (micro 8)", 43008)]},
        "update_actor": {
            "backward start": [*actor, ("actor checkpointed layer inputs (micro 4)", 2048),
                               ("actor (micro 4) logits", 1280), ("actor (micro 4) logits gradient", 1280)],
            "layer recompute": [*actor, ("actor checkpointed layer inputs (micro 4)", 2048),
                                ("actor recomputed layer (micro 4)", 29184)],
            "optimizer step": [*actor, ("actor Adam step temporary", 6752)]},
        "update_critic": {
            "backward start": [*critic, ("critic checkpointed layer inputs (micro 4)", 2048)],
            "layer recompute": [*critic, ("critic checkpointed layer inputs (micro 4)", 2048),
                                ("critic recomputed layer (micro 4)", 29184)],
            "optimizer step": [*critic, ("critic Adam step temporary", 6752)]},
    }
    assert est.moments == {"rollout": "prefill", "log_prob": "actor old log-prob layer",
                           "update_actor": "layer recompute", "update_critic": "layer recompute"}
    assert [t.name for t in est.phases["update_critic"]] == \
        [n for n, _ in moments_of(est)["update_critic"]["layer recompute"]]
    assert est.notes == ["HF rollout generates 6 sequences per GPU at once (set "
                         "+actor_rollout_ref.rollout.micro_batch_size to chunk it)"]
    assert est.params == {"architecture": "model", "params": 1688, "lora_params": 0, "trainable": 1688, "n_gpus": 1,
                          "sequence_tokens": 8, "precision": {
                              "actor_storage": "fp32", "actor_compute": "fp32", "ref_storage": "fp32",
                              "critic_storage": "fp32", "critic_compute": "fp32", "rollout": "fp32"},
                          "reference": "none", "critic": True}
    assert (est.gpu_memory_gib, est.engine_share_gib, est.resident_at_rollout_gib, est.known) == \
        (24.0, None, None, True)
    # the peak: the actor's (or the critic's: the same bytes, the first one counted wins) layer recompute
    assert est.peak_phase == "update_actor"
    assert est.total_gib * GIB == 6752 + 6752 + 6752 + 13504 + 2048 + 29184 + 2 ** 29


FLIPPED = [*SHORT, "actor_rollout_ref.rollout.n=2", "actor_rollout_ref.actor.use_kl_loss=true",
           "actor_rollout_ref.actor.fsdp_config.param_offload=true", "critic.model.fsdp_config.param_offload=true",
           "actor_rollout_ref.actor.fsdp_config.optimizer_offload=false",
           "critic.model.fsdp_config.optimizer_offload=false", *NO_GC, "actor_rollout_ref.actor.entropy_coeff=0.01",
           "+actor_rollout_ref.rollout.micro_batch_size=4", "actor_rollout_ref.actor.use_dynamic_bsz=true",
           "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
           "+actor_rollout_ref.ref.fsdp_config.model_dtype=bf16",
           "+critic.model.fsdp_config.mixed_precision.param_dtype=bf16"]


def test_tiny_p40_ppo_with_every_switch_flipped_by_hand(tiny):
    """The same tiny P40 PPO with a reference model (KL loss; bf16, offloaded: loaded for its own pass), both
    models' weights offloaded and their optimizers resident, no checkpointing, an entropy bonus, dynamic batch
    sizes, 2 responses a prompt generated 4 at a time, a bf16 critic compute.
    Resident: actor and critic weights 0 (CPU), Adam 13504 each, reference 0; HF generate loads the actor: 6752.
    Rollout, g = min(6 x 2, 4) = 4, KV per token 2 x 2 x 2 x 2 x 4 B x 4 = 256:
      prefill: KV 256 x 3 = 768; MLP 3 x 4x3x24 x 4 = 3456 (> attention 1728 + 1152) + hidden 4x3x8 x 4 = 384
      end:     KV 256 x 8 = 2048; repeated 2048 / 2 x 4 / 2 = 2048; logits 4 x 10 x 4 x 3 = 480 (4576 < 4608)
    Reference log-probs (bf16, micro 2 x 8 = 16 tokens): its weights 1688 x 2 = 3376 loaded; logits
      16 x 10 x 2 = 320; live layer (4h + 3I) x 2 = 208 B x 16 = 3328 + scores 2x4x8x8 x 2 x 2 = 2048 -> 5376.
    Actor update without checkpointing: 2 layers x 29184 = 58368, logits 1280 + gradient 1280 + entropy
      2 x 4 x 5 x 10 x 4 = 1600 -> 62528 > the optimizer step's 6752.
    Critic update (bf16): a layer (17h + 8I) x 2/2 = 328 B x 32 = 10496 + scores 4x4x8x8 x 2 x 2 = 4096
      = 14592, x 2 layers = 29184; no logits (a value head)."""
    est = estimate_memory(tiny(PPO, overrides=FLIPPED))
    resident = [("actor weights", 0), ("actor Adam state", 13504), ("reference weights", 0), ("critic weights", 0),
                ("critic Adam state", 13504), CTX]
    loaded = [("actor weights", 6752), *resident[1:]]
    ref = [*resident, ("reference weights (loaded for its pass)", 3376)]
    actor = [("reference weights", 0), ("critic weights", 0), ("critic Adam state", 13504), CTX,
             ("actor weights", 6752), ("actor gradients", 6752), ("actor Adam state", 13504)]
    critic = [("actor weights", 0), ("actor Adam state", 13504), ("reference weights", 0), CTX,
              ("critic weights", 6752), ("critic gradients", 6752), ("critic Adam state", 13504)]
    assert moments_of(est) == {
        "rollout": {
            "prefill": [*loaded, ("KV cache (4 sequences x 3 prompt tokens)", 768), ("prefill MLP activations", 3840)],
            "end of decoding": [*loaded, ("KV cache (HF generate, 4 sequences x 8 tokens)", 2048),
                                ("one layer's K/V repeated to every head", 2048),
                                ("sampling logits (last token, fp32)", 480)]},
        "log_prob": {
            "actor old log-prob logits": [*resident, ("actor old log-prob (micro 8) logits", 2560),
                                          ("actor old log-prob (micro 8) entropy temporaries", 3200)],
            "actor old log-prob layer": [*resident, ("actor old log-prob layer (micro 8)", 43008)],
            "reference log-prob logits": [*ref, ("reference log-prob (micro 2) logits", 320)],
            "reference log-prob layer": [*ref, ("reference log-prob layer (micro 2)", 5376)]},
        "update_actor": {
            "backward start": [*actor, ("actor activations of 2 layers (micro 4, no checkpointing)", 58368),
                               ("actor (micro 4) logits", 1280), ("actor (micro 4) logits gradient", 1280),
                               ("actor (micro 4) entropy temporaries", 1600)],
            "optimizer step": [*actor, ("actor Adam step temporary", 6752)]},
        "update_critic": {
            "backward start": [*critic, ("critic activations of 2 layers (micro 4, no checkpointing)", 29184)],
            "optimizer step": [*critic, ("critic Adam step temporary", 6752)]},
    }
    assert est.moments == {"rollout": "prefill", "log_prob": "actor old log-prob layer",
                           "update_actor": "backward start", "update_critic": "backward start"}
    assert est.notes == ["use_dynamic_bsz is on: micro batches are packed by tokens; the estimate uses the per-GPU "
                         "micro batch sizes at full sequence length",
                         "HF rollout generates 4 sequences per GPU at once (set "
                         "+actor_rollout_ref.rollout.micro_batch_size to chunk it)"]
    assert est.params["reference"] == "separate"
    assert est.params["precision"]["ref_storage"] == "bf16" and est.params["precision"]["critic_compute"] == "bf16"


def test_tiny_grpo_lora_on_vllm_by_hand(tiny):
    """A100 GRPO-LoRA (vLLM, bf16 compute over fp32 storage, flash-attn, checkpointing) on 3 GPUs of a detected
    40 GiB card, LoRA rank 2 on q_proj and v_proj only: 2 layers x 2 x ((8 + 8) + (8 + 4)) = 112 adapter params.
    Actor weights (1688 + 112) x 4 / 3 = 2400; LoRA gradients 112 x 4 / 3, Adam 112 x 8 / 3. No critic, and the
    reference is the actor without its adapter.
    vLLM holds 0.5 x 40 GiB = 20 GiB (its own context beside it); resident when it starts: 2400 + 112 x 8 / 3 + 0.5 GiB.
    Old log-probs, micro 3 x 8 = 24 tokens, bf16: logits 24 x 10 x 2 = 480, entropy 2 x 3 x 5 x 10 x 2 = 600;
      live layer 208 B x 24 = 4992 (no score matrices: flash-attn).
    Update, micro 2 x 8 = 16 tokens: kept 2 x 16 x 8 x 2 = 512, recomputed layer 328 B x 16 = 5248; logits
      16 x 10 x 2 = 320 and gradient (flash-attn's cross-entropy keeps no log-softmax rows)."""
    run = tiny(GRPO, overrides=[*SHORT, "trainer.n_gpus_per_node=3", "actor_rollout_ref.model.lora_rank=2",
                                "actor_rollout_ref.model.target_modules=[q_proj,v_proj]",
                                "actor_rollout_ref.rollout.gpu_memory_utilization=0.5",
                                "actor_rollout_ref.rollout.tensor_model_parallel_size=3",
                                "actor_rollout_ref.rollout.free_cache_engine=false",
                                "actor_rollout_ref.actor.ppo_mini_batch_size=6",
                                "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=3",
                                "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2"])
    est = estimate_memory(run, inventory_gpu=Gpu(0, "NVIDIA A100-SXM4-40GB", 40960, "8.0"))
    resident = [("actor weights", 2400), ("actor Adam state", 112 * 8 / 3), CTX]
    actor = [CTX, ("actor weights", 2400), ("actor gradients (LoRA)", 112 * 4 / 3),
             ("actor Adam state (LoRA)", 112 * 8 / 3)]
    assert moments_of(est) == {
        "rollout": {"generation": [
            *resident, ("vllm gpu_memory_utilization 0.5 x 40 GiB (weights/TP3, KV cache, graphs)", 20 * GIB),
            ("vllm process CUDA context", 2 ** 29)]},
        "log_prob": {
            "actor old log-prob logits": [*resident, ("actor old log-prob (micro 3) logits", 480),
                                          ("actor old log-prob (micro 3) entropy temporaries", 600)],
            "actor old log-prob layer": [*resident, ("actor old log-prob layer (micro 3)", 4992)]},
        "update_actor": {
            "backward start": [*actor, ("actor checkpointed layer inputs (micro 2)", 512),
                               ("actor (micro 2) logits", 320), ("actor (micro 2) logits gradient", 320)],
            "layer recompute": [*actor, ("actor checkpointed layer inputs (micro 2)", 512),
                                ("actor recomputed layer (micro 2)", 5248)],
            "optimizer step": [*actor, ("actor Adam step temporary", 112 * 4 / 3)]},
    }
    assert set(est.candidates) == {"log_prob", "update_actor"}  # vLLM's rollout is one moment
    assert est.moments == {"rollout": "generation", "log_prob": "actor old log-prob layer",
                           "update_actor": "layer recompute"}
    assert (est.gpu_memory_gib, est.engine_share_gib) == (40.0, 20.0)
    assert est.resident_at_rollout_gib == (2400 + 112 * 8 / 3 + 2 ** 29) / GIB
    assert est.notes == ["vllm reserves gpu_memory_utilization x total GPU memory when it starts; the trainer state "
                         "resident at that moment must fit in the rest",
                         "free_cache_engine is off: the engine keeps its share during the update phases"]
    assert est.params == {"architecture": "model", "params": 1688, "lora_params": 112, "trainable": 112, "n_gpus": 3,
                          "sequence_tokens": 8, "precision": {
                              "actor_storage": "fp32", "actor_compute": "bf16", "ref_storage": "bf16",
                              "critic_storage": "fp32", "critic_compute": "bf16", "rollout": "bf16"},
                          "reference": "actor without adapter", "critic": False}
    assert est.peak_phase == "rollout"


def test_tiny_verl_09_engine_logits_by_hand(tiny):
    """H200 (verl 0.9.1's engine, no flash-attn: padded logits under bf16 autocast), full fine-tune (so a bf16
    reference, micro 16), fused kernels off, an entropy bonus; micro 32 x 8 = 256 tokens, bf16 logits 256 x 10 x 2
    = 5120. Old log-probs: + the entropy's fp32 softmax 256 x 10 x 4 = 10240 and logsumexp 256 x 10 x 8 = 20480.
    Reference (no entropy, 128 tokens): logits 2560 + their unpadded copy 2560. The update (entropy on) holds all
    six: logits, softmax, logsumexp, unpadded copy, fp32 per-token log-softmax 10240, gradient 5120 = 56320, + kept
    inputs 2 x 256 x 8 x 2 = 8192 -> 64512 < layer recompute 8192 + 328 x 256 = 92160.
    vLLM: 0.6 x 140 GiB; states: actor 6752 + Adam 13504 + reference 1688 x 2 = 3376."""
    est = estimate_memory(tiny(GRPO, "h200-141gb", [*SHORT, *UNFUSED, "actor_rollout_ref.actor.entropy_coeff=0.01",
                                                   "actor_rollout_ref.model.lora_rank=0",
                                                   "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16"]))
    resident = [("actor weights", 6752), ("actor Adam state", 13504), ("reference weights", 3376), CTX]
    actor = [("reference weights", 3376), CTX, ("actor weights", 6752), ("actor gradients", 6752),
             ("actor Adam state", 13504)]
    old, ref, upd = "actor old log-prob (micro 32)", "reference log-prob (micro 16)", "actor (micro 32)"
    assert moments_of(est) == {
        "rollout": {"generation": [*resident,
                                   ("vllm gpu_memory_utilization 0.6 x 140 GiB (weights/TP1, KV cache, graphs)",
                                    0.6 * 140 * GIB), ("vllm process CUDA context", 2 ** 29)]},
        "log_prob": {
            "actor old log-prob logits": [*resident, (f"{old} logits", 5120),
                                          (f"{old} entropy: fp32 softmax over every padded position", 10240),
                                          (f"{old} entropy: fp32 logsumexp temporaries", 20480)],
            "actor old log-prob layer": [*resident, ("actor old log-prob layer (micro 32)", 208 * 256)],
            "reference log-prob logits": [*resident, (f"{ref} logits", 2560),
                                          (f"{ref} unpadded copy of the logits", 2560)],
            "reference log-prob layer": [*resident, ("reference log-prob layer (micro 16)", 208 * 128)]},
        "update_actor": {
            "backward start": [*actor, ("actor checkpointed layer inputs (micro 32)", 8192), (f"{upd} logits", 5120),
                               (f"{upd} entropy: fp32 softmax over every padded position", 10240),
                               (f"{upd} entropy: fp32 logsumexp temporaries", 20480),
                               (f"{upd} unpadded copy of the logits", 5120),
                               (f"{upd} per-token log-softmax kept for backward (fp32)", 10240),
                               (f"{upd} logits gradient", 5120)],
            "layer recompute": [*actor, ("actor checkpointed layer inputs (micro 32)", 8192),
                                ("actor recomputed layer (micro 32)", 328 * 256)],
            "optimizer step": [*actor, ("actor Adam step temporary", 6752)]},
    }
    assert est.moments["update_actor"] == "layer recompute" and est.moments["log_prob"] == "actor old log-prob layer"


@pytest.mark.parametrize("prompt,tokens", [(3, 256), (60, 512)])
def test_tiny_fused_kernels_hold_one_chunk_of_at_most_512_tokens(tiny, prompt, tokens):
    """Fused kernels: fp32 logits, softmax and gradient of one chunk, min(micro 32 x s, 512) tokens x 10 x 12 B:
    s = 8 -> 256 tokens (30720 B); s = 65 -> 2080 tokens, chunked to 512 (61440 B). Nothing else of the logits."""
    est = estimate_memory(tiny(GRPO, "h200-141gb", [f"data.max_prompt_length={prompt}",
                                                   "data.max_response_length=5"]))
    chunk = "(micro 32) fused log-prob/entropy chunk (512 tokens x vocab, fp32)"
    logits = moments_of(est)["log_prob"]["actor old log-prob logits"]
    assert logits[3:] == [(f"actor old log-prob {chunk}", tokens * 10 * 12)]
    backward = moments_of(est)["update_actor"]["backward start"]
    assert backward[-1] == (f"actor {chunk}", tokens * 10 * 12)
    assert backward[-2][0] == "actor checkpointed layer inputs (micro 32)"


def test_tiny_verl_05_bf16_sdpa_unknown_storage_dtype_by_hand(tiny):
    """GRPO-LoRA on one GPU with verl 0.5.0 (no flash-attn, HF generate), SDPA, bf16 compute, and a storage dtype
    the planner does not know (fp64: counted as 4 B). A narrow MLP (I = 4) so that prefill attention outgrows it.
    Parameters per layer 72 + 36 + 36 + 64 + 3 x 32 + 16 = 320, x 2 + 80 + 8 = 728; LoRA rank 64 on all seven
    projections: 2 x 64 x (16 + 12 + 12 + 16 + 12 + 12 + 12) = 11776. Actor weights (728 + 11776) x 4 = 50016.
    Rollout in the storage dtype (4 B), g = 6 x 5 = 30: attention 3 x 30x4x3x2 x 4 = 8640 (no scores: SDPA)
      >= MLP 3 x 30x3x4 x 4 = 4320, + hidden 30x3x8 x 4 = 2880 -> 11520.
    Update, micro 2 x 8 tokens, bf16 without flash-attn: logits 2 x 8 x 10 x 2 = 320, gradient 320 and the
      log-softmax rows autograd keeps, over the response: 2 x 5 x 10 x 2 = 200.
    Old log-probs, micro 4 x 8 = 32 tokens: live layer (4h + 3I) x 2 = 88 B x 32 = 2816, no score matrices."""
    est = estimate_memory(tiny(GRPO, "any-1gpu", [
        *SHORT, "+actor_rollout_ref.model.override_config._attn_implementation=sdpa",
        "+actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=bf16",
        "+actor_rollout_ref.actor.fsdp_config.model_dtype=fp64", "actor_rollout_ref.actor.ppo_mini_batch_size=6"],
        config={**TINY, "intermediate_size": 4}))
    assert (est.params["params"], est.params["lora_params"], est.params["precision"]["rollout"]) == (728, 11776, "fp64")
    table = moments_of(est)
    assert ("actor weights", 50016) in table["rollout"]["prefill"]
    assert table["rollout"]["prefill"][-1] == ("prefill attention", 11520)
    assert table["update_actor"]["backward start"][-3:] == [
        ("actor (micro 2) logits", 320), ("actor (micro 2) logits gradient", 320),
        ("actor (micro 2) log-softmax rows kept for backward", 200)]
    assert table["log_prob"]["actor old log-prob layer"][-1] == ("actor old log-prob layer (micro 4)", 2816)


@pytest.mark.parametrize("overrides,micro", [
    # actor 3; log-probs and the critic fall back to the actor's, the reference to the log-probs'
    (["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3",
      "~actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", "~critic.ppo_micro_batch_size_per_gpu",
      "~actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"], {"old": 3, "ref": 3, "actor": 3, "critic": 3}),
    (["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3",
      "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=5",
      "~actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"], {"old": 5, "ref": 5, "actor": 3, "critic": 4}),
    # set to null (verl's own default): the same fallbacks
    (["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3",
      "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=null", "critic.ppo_micro_batch_size_per_gpu=null",
      "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=null"], {"old": 3, "ref": 3, "actor": 3, "critic": 3}),
    (["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=null"], {"old": 8, "ref": 8, "actor": 1, "critic": 4}),
    # none set: 1 each
    (["~actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
      "~actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
      "~critic.ppo_micro_batch_size_per_gpu", "~actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"],
     {"old": 1, "ref": 1, "actor": 1, "critic": 1}),
])
def test_micro_batch_fallbacks(tiny, overrides, micro):
    est = estimate_memory(tiny(PPO, overrides=[*SHORT, "actor_rollout_ref.actor.use_kl_loss=true", *overrides]))
    names = {m: [n for n, _ in terms] for p in moments_of(est).values() for m, terms in p.items()}
    assert f"actor old log-prob layer (micro {micro['old']})" in names["actor old log-prob layer"]
    assert f"reference log-prob layer (micro {micro['ref']})" in names["reference log-prob layer"]
    assert f"actor (micro {micro['actor']}) logits" in [n for n, _ in moments_of(est)["update_actor"]["backward start"]]
    assert f"critic checkpointed layer inputs (micro {micro['critic']})" in \
        [n for n, _ in moments_of(est)["update_critic"]["backward start"]]


def test_rollout_engine_and_attention_fall_back_to_the_profile(tiny):
    """Keys removed from the final overrides: the profile's rollout engine (HF on the P40, vLLM on the A100)
    and attention (eager on the P40: the score matrices stay)."""
    hf = estimate_memory(tiny(PPO, overrides=[*SHORT, "~actor_rollout_ref.rollout.name",
                                              "~actor_rollout_ref.model.override_config._attn_implementation"]))
    assert hf.moments["rollout"] == "prefill" and hf.notes[0].startswith("HF rollout generates 6 sequences")
    assert term(hf, "log_prob", "actor old log-prob layer (micro 8)", moment="actor old log-prob layer") == 43008
    vllm = estimate_memory(tiny(GRPO, overrides=[*SHORT, "~actor_rollout_ref.rollout.name"]))
    assert vllm.moments["rollout"] == "generation" and vllm.engine_share_gib == 64.0


def test_sglang_reserves_its_share_like_vllm(tiny):
    est = estimate_memory(tiny(GRPO, overrides=[*SHORT, "actor_rollout_ref.rollout.name=sglang"]))
    assert term(est, "rollout",
                "sglang gpu_memory_utilization 0.8 x 80 GiB (weights/TP1, KV cache, graphs)") == 64 * GIB
    assert term(est, "rollout", "sglang process CUDA context") == GIB / 2
    assert est.notes[0].startswith("sglang reserves gpu_memory_utilization x total GPU memory")


@pytest.mark.parametrize("gpu", [None, Gpu(0, "no memory reading", 0, "8.0"), object()])
def test_a_gpu_without_a_memory_reading_plans_against_the_profile(tiny, gpu):
    est = estimate_memory(tiny(GRPO, overrides=SHORT), inventory_gpu=gpu)
    assert est.gpu_memory_gib == 80.0 and est.engine_share_gib == 0.8 * 80


@pytest.mark.parametrize("recipe", ["smoke-ppo", "smoke-grpo-lora", "canary-ppo", "canary-grpo-lora"])
def test_a_model_built_offline_has_the_architecture_its_builder_builds(recipe, tmp_path):
    """smoke-/canary-assets build the `tiny` Qwen2 (no hub entry, no config.json before they run): the plan
    said "GPU memory ~0.0 GiB" with an empty term table."""
    run = resolve(recipe, env={"MODELS_DIR": str(tmp_path)})
    assert architecture(run) == ARCHITECTURES["tiny"]
    est = estimate_memory(run)
    assert est.known and est.params["params"] == param_count(ARCHITECTURES["tiny"])
    assert est.terms and est.total_gib > 0.5  # the CUDA context alone is 0.5 GiB


def test_unknown_architecture_note_in_full(tmp_path):
    run = unknown_model_run(tmp_path)
    est = estimate_memory(run, inventory_gpu=Gpu(0, "X", 12288, "8.0"))
    assert est.notes == [f"unknown architecture for {run.recipe.model.hub_id}: no config.json in {run.model_path} "
                         "and no entry in rlrecipes.plan.architectures.ARCHITECTURES"]
    assert (est.gpu_memory_gib, est.known, est.phases, est.candidates, est.moments) == (12.0, False, {}, {}, {})


def test_memory_estimate_reports_the_biggest_phase_and_its_nonzero_terms():
    est = MemoryEstimate(24.12345, {"a": [Term("x", GIB), Term("y", 0.0), Term("one byte", 1.0)],
                                    "b": [Term("small", GIB / 4), Term("zero", 0.0), Term("big", 3 * GIB),
                                          Term("mid", 1.23456 * GIB), Term("tiny", 1024.0)]},
                         notes=["n"], moments={"b": "step"})
    assert Term("x", GIB / 2).gib == 0.5
    assert (est.phase_gib("a"), est.peak_phase) == ((GIB + 1) / GIB, "b")
    assert est.phase_gib("b") == est.total_gib == (4.48456 * GIB + 1024) / GIB
    assert [t.name for t in est.terms] == ["big", "mid", "small", "tiny"]
    assert est.biggest() == "big 3.0, mid 1.2, small 0.2" and est.biggest(1) == "big 3.0"
    assert est.as_dict() == {
        "total_gib": 4.485, "gpu_memory_gib": 24.123, "peak_phase": "b",
        "terms": [{"name": "big", "gib": 3.0}, {"name": "mid", "gib": 1.235}, {"name": "small", "gib": 0.25},
                  {"name": "tiny", "gib": 0.0}],
        "peak_moment": "step",
        "phases": {"a": {"total_gib": 1.0, "moment": None, "terms": [{"name": "x", "gib": 1.0},
                                                                    {"name": "one byte", "gib": 0.0}]},
                   "b": {"total_gib": 4.485, "moment": "step",
                         "terms": [{"name": "small", "gib": 0.25}, {"name": "big", "gib": 3.0},
                                   {"name": "mid", "gib": 1.235}, {"name": "tiny", "gib": 0.0}]}},
        "engine_share_gib": None, "resident_at_rollout_gib": None, "params": {}, "notes": ["n"], "known": True}
    shares = MemoryEstimate(24.0, {"a": [Term("x", GIB)]}, engine_share_gib=12.34567, resident_at_rollout_gib=1.23456)
    assert (shares.as_dict()["engine_share_gib"], shares.as_dict()["resident_at_rollout_gib"]) == (12.346, 1.235)


def test_an_empty_estimate_has_no_peak():
    est = MemoryEstimate(16.5, {}, known=False)
    assert (est.peak_phase, est.total_gib, est.terms, est.biggest()) == ("", 0.0, [], "")
    assert est.as_dict() == {"total_gib": 0.0, "gpu_memory_gib": 16.5, "peak_phase": "", "terms": [],
                             "peak_moment": None, "phases": {}, "engine_share_gib": None,
                             "resident_at_rollout_gib": None, "params": {}, "notes": [], "known": False}


@pytest.mark.parametrize("critic,ref,expected", [
    (False, False, {"actor": "ac", "rollout": "ro"}),
    (True, False, {"actor": "ac", "rollout": "ro", "critic": "cc"}),
    (False, True, {"actor": "ac", "rollout": "ro", "reference": "rs"}),
    (True, True, {"actor": "ac", "rollout": "ro", "reference": "rs", "critic": "cc"}),
])
def test_precision_used_names_each_model_in_its_compute_dtype(critic, ref, expected):
    assert Precision("as", "ac", "rs", "cs", "cc", "ro").used(critic, ref) == expected


@pytest.mark.parametrize("value,expected", [
    (None, "dflt"), ("torch.float32", "fp32"), ("float", "fp32"), ("FLOAT32", "fp32"), ("torch.bfloat16", "bf16"),
    ("float16", "fp16"), ("half", "fp16"), ("bf16", "bf16"), ("fp8", "fp8"),
])
def test_dtype_names(value, expected):
    assert _dtype_name(value, "dflt") == expected


def test_precision_reads_every_dtype_key(tiny):
    run = tiny(PPO, overrides=["+actor_rollout_ref.actor.fsdp_config.model_dtype=torch.bfloat16",
                               "+actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=half",
                               "+actor_rollout_ref.ref.fsdp_config.model_dtype=float",
                               "+critic.model.fsdp_config.model_dtype=float16",
                               "+critic.model.fsdp_config.mixed_precision.param_dtype=bfloat16"])
    # HF generate computes in the actor's storage dtype
    assert precision(run) == Precision("bf16", "fp16", "fp32", "fp16", "bf16", "bf16")
    vllm = tiny(GRPO, overrides=["actor_rollout_ref.rollout.dtype=half"])
    assert precision(vllm) == Precision("fp32", "bf16", "bf16", "fp32", "bf16", "fp16")
    # the engine of the final overrides decides, not the profile's (vLLM on the A100)
    assert precision(tiny(GRPO, overrides=["actor_rollout_ref.rollout.name=hf"])).rollout == "fp32"
    # unset in verl's own config: fp32 storage, bf16 compute, a bf16 reference and rollout
    bare = tiny(GRPO, overrides=["~actor_rollout_ref.rollout.dtype", "~actor_rollout_ref.ref.fsdp_config.model_dtype",
                                 "~actor_rollout_ref.actor.fsdp_config.model_dtype"])
    assert precision(bare) == Precision("fp32", "bf16", "bf16", "fp32", "bf16", "bf16")


def test_host_ram_need_by_hand(tiny):
    """P40 PPO (1 GPU, optimizers offloaded, tied embeddings): both Adam states on the CPU, 1688 x 8 = 13504 B
    each; the fp32 checkpoint loaded once per rank, 1688 x 4 = 6752 B; one 3 GiB worker; Ray 4 GiB."""
    need, parts = host_ram_need(tiny(PPO))
    assert need == 13504 + 13504 + 6752 + 3 * GIB + 4 * GIB
    assert parts == ["actor Adam state offloaded 13.2 KiB", "critic Adam state offloaded 13.2 KiB",
                     "model loading (1 rank(s) x fp32) 6.6 KiB", "1 worker process(es) 3.0 GiB",
                     "Ray head, driver, dataloader 4.0 GiB"]


def test_host_ram_need_with_every_offload_on_two_nodes(tiny):
    """2 nodes of 1 GPU: a node holds half of each offloaded state. Actor Adam 1688 x 8 / 2 = 6752, actor weights
    1688 x 4 / 2 = 3376, the reference 3376, the critic's Adam 6752 and weights 3376; loading 6752 in each rank."""
    need, parts = host_ram_need(tiny(PPO, overrides=["trainer.nnodes=2", "actor_rollout_ref.actor.use_kl_loss=true",
                                                     "actor_rollout_ref.actor.fsdp_config.param_offload=true",
                                                     "critic.model.fsdp_config.param_offload=true"]))
    assert parts == ["actor Adam state offloaded 6.6 KiB", "actor weights offloaded 3.3 KiB",
                     "reference weights offloaded 3.3 KiB", "critic Adam state offloaded 6.6 KiB",
                     "critic weights offloaded 3.3 KiB", "model loading (1 rank(s) x fp32) 6.6 KiB",
                     "1 worker process(es) 3.0 GiB", "Ray head, driver, dataloader 4.0 GiB"]
    assert need == 6752 + 3376 + 3376 + 6752 + 3376 + 6752 + 3 * GIB + 4 * GIB


def test_host_ram_need_lora_vllm_and_untied_embeddings(tiny):
    """A100 GRPO-LoRA, 4 GPUs, optimizer offloaded: the adapter's Adam state 19456 x 8 = 155648 B (rank 64 on all
    seven projections); untied embeddings: rank 0 alone loads the checkpoint, (1688 + 80) x 4 = 7072 B; 4 workers
    of 3 GiB and 4 vLLM servers of 2 GiB. With tied embeddings every rank loads it: 4 x 6752."""
    overrides = ["actor_rollout_ref.actor.fsdp_config.optimizer_offload=true",
                 "actor_rollout_ref.ref.fsdp_config.param_offload=true"]
    need, parts = host_ram_need(tiny(GRPO, overrides=overrides, config={**TINY, "tie_word_embeddings": False}))
    assert parts == ["actor Adam state offloaded 152.0 KiB", "model loading (1 rank(s) x fp32) 6.9 KiB",
                     "4 worker process(es) 12.0 GiB", "4 rollout server(s) 8.0 GiB",
                     "Ray head, driver, dataloader 4.0 GiB"]
    assert need == 155648 + 7072 + 12 * GIB + 8 * GIB + 4 * GIB
    _, tied = host_ram_need(tiny(GRPO, overrides=overrides))
    assert tied[1] == "model loading (4 rank(s) x fp32) 26.4 KiB"


def test_host_ram_need_and_checkpoint_bytes_count_the_runs_own_lora_targets(tiny):
    """target_modules [q_proj, v_proj] at rank 64 on the tiny model (hidden 8, 2 KV heads of 2): q 64 x (8 + 8)
    + v 64 x (8 + 4) = 1792 per layer, 3584 for two; offloaded Adam 3584 x 8 = 28672 B. All seven projections
    would be 19456 (the test above): the estimate once counted those whatever the run adapted."""
    overrides = ["actor_rollout_ref.actor.fsdp_config.optimizer_offload=true",
                 "actor_rollout_ref.model.target_modules=[q_proj,v_proj]"]
    run = tiny(GRPO, overrides=overrides)
    _, parts = host_ram_need(run)
    assert parts[0] == "actor Adam state offloaded 28.0 KiB"
    assert checkpoint_bytes(run, architecture(run)) == {"actor": (TINY_PARAMS + 3584) * 4 + 3584 * 8}
    assert estimate_memory(run).params["lora_params"] == 3584


def test_host_ram_need_of_an_unknown_model(tmp_path):
    """No architecture: the processes alone (the P40 profile: one GPU, HF generate)."""
    need, parts = host_ram_need(unknown_model_run(tmp_path))
    assert (need, parts) == (7 * GIB, ["1 worker process(es) 3.0 GiB", "Ray head, driver, dataloader 4.0 GiB"])


def test_offload_flags_unset_anywhere_keep_every_state_on_the_gpu(tiny):
    """No offload key in the final config (the profile's removed): weights and Adam states stay resident --
    actor and critic 1688 x 4 + 1688 x 8, the fp32 reference 1688 x 4."""
    est = estimate_memory(tiny(PPO, overrides=[*SHORT, "actor_rollout_ref.actor.use_kl_loss=true",
                                               "~actor_rollout_ref.actor.fsdp_config.param_offload",
                                               "~actor_rollout_ref.actor.fsdp_config.optimizer_offload",
                                               "~critic.model.fsdp_config.param_offload",
                                               "~critic.model.fsdp_config.optimizer_offload",
                                               "~actor_rollout_ref.ref.fsdp_config.param_offload"]))
    assert moments_of(est)["rollout"]["prefill"][:6] == [
        ("actor weights", 6752), ("actor Adam state", 13504), ("reference weights", 6752), ("critic weights", 6752),
        ("critic Adam state", 13504), CTX]
    assert term(est, "update_actor", "actor Adam state") == 13504  # not "(loaded from CPU)"
    assert term(est, "log_prob", "actor weights", moment="actor old log-prob layer") == 6752
    assert term(est, "update_critic", "actor weights", moment="optimizer step") == 6752
    assert not any("loaded for its pass" in t.name for ts in est.candidates["log_prob"].values() for t in ts)


def test_fused_kernels_unset_means_unfused(tiny):
    est = estimate_memory(tiny(GRPO, "h200-141gb", [*SHORT, "~actor_rollout_ref.model.use_fused_kernels"]))
    assert [n for n, _ in moments_of(est)["log_prob"]["actor old log-prob logits"][3:]] == [
        "actor old log-prob (micro 32) logits",
        "actor old log-prob (micro 32) entropy: fp32 softmax over every padded position",
        "actor old log-prob (micro 32) entropy: fp32 logsumexp temporaries"]


def test_lora_without_a_kl_term_has_no_reference(tiny):
    est = estimate_memory(tiny(GRPO, overrides=[*SHORT, "actor_rollout_ref.actor.use_kl_loss=false"]))
    assert est.params["reference"] == "none" and "reference log-prob logits" not in est.candidates["log_prob"]


def test_hf_generate_runs_at_least_one_sequence_per_gpu(tiny):
    """4 prompts x 1 response over 8 GPUs: 4 // 8 = 0, still one sequence per GPU (KV 2 x 2 x 2 x 2 x 4 B x 1
    x 8 tokens = 512 B); weights 1688 x 4 / 8 = 844."""
    est = estimate_memory(tiny(PPO, overrides=[*SHORT, "trainer.n_gpus_per_node=8", "data.train_batch_size=4",
                                               "actor_rollout_ref.actor.ppo_mini_batch_size=4",
                                               "critic.ppo_mini_batch_size=4"]))
    assert term(est, "rollout", "KV cache (HF generate, 1 sequences x 8 tokens)", moment="end of decoding") == 512
    assert term(est, "rollout", "actor weights") == 844
    # the critic's states are sharded the same way: gradients 1688 x 4 / 8, Adam 1688 x 8 / 8
    assert term(est, "update_critic", "critic gradients") == 844
    assert term(est, "update_critic", "critic Adam state (loaded from CPU)") == 1688
    assert est.notes == ["HF rollout generates 1 sequences per GPU at once (set "
                         "+actor_rollout_ref.rollout.micro_batch_size to chunk it)"]


@pytest.mark.parametrize("attention,intermediate,name", [
    # SDPA: attention 3 x g x heads x prompt x head_dim = 3 x g x 3 x 8 equals the MLP's 3 x g x 3 x I at I = 8
    ("sdpa", 8, "prefill attention"), ("sdpa", 9, "prefill MLP activations"),
    # eager adds heads x prompt^2 x 3: 3 x g x 3 x 4 x (3 + 2) equals the MLP at I = 20
    ("eager", 20, "prefill attention scores + heads (eager)"), ("eager", 21, "prefill MLP activations"),
])
def test_prefill_attention_counts_when_it_ties_the_mlp(tiny, attention, intermediate, name):
    attn = f"+actor_rollout_ref.model.override_config._attn_implementation={attention}"
    est = estimate_memory(tiny(PPO, overrides=[*SHORT, attn], config={**TINY, "intermediate_size": intermediate}))
    prefill = moments_of(est)["rollout"]["prefill"]
    # g = 6, fp32: hidden 6 x 3 x 8 x 4 = 576 beside the bigger of the two
    assert prefill[-1] == (name, 3 * 6 * 3 * max(intermediate, 8 if attention == "sdpa" else 20) * 4 + 576)


def test_hf_rollout_in_bf16_storage_by_hand(tiny):
    """bf16 storage for the actor and the critic (2 B): weights 1688 x 2 = 3376 each; HF generate computes in the
    actor's storage dtype, so the KV cache per token is 2 x 2 x 2 x 2 x 2 B x 6 sequences = 192 (1536 for 8 tokens)."""
    est = estimate_memory(tiny(PPO, overrides=[*SHORT, "+actor_rollout_ref.actor.fsdp_config.model_dtype=bf16",
                                               "+critic.model.fsdp_config.model_dtype=bf16"]))
    assert moments_of(est)["rollout"]["end of decoding"][:2] == [("actor weights", 3376), ("actor Adam state", 0)]
    assert term(est, "rollout", "critic weights", moment="end of decoding") == 3376
    assert term(est, "rollout", "KV cache (HF generate, 6 sequences x 8 tokens)", moment="end of decoding") == 1536


def test_unknown_compute_dtype_counts_4_bytes(tiny):
    """A mixed-precision dtype the planner does not know (fp64) counts 4 B, as fp32 in
    test_tiny_p40_ppo_every_term_by_hand: logits 4 x 8 x 10 x 4 = 1280, kept inputs 2048, recomputed layer 29184,
    the old log-probs' logits 2560 and live layer 43008."""
    fp64 = "+actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=fp64"
    est = estimate_memory(tiny(PPO, overrides=[*SHORT, fp64]))
    assert term(est, "update_actor", "actor (micro 4) logits", moment="backward start") == 1280
    assert term(est, "update_actor", "actor checkpointed layer inputs (micro 4)", moment="layer recompute") == 2048
    assert term(est, "update_actor", "actor recomputed layer (micro 4)", moment="layer recompute") == 29184
    assert term(est, "log_prob", "actor old log-prob (micro 8) logits", moment="actor old log-prob logits") == 2560
    assert term(est, "log_prob", "actor old log-prob layer (micro 8)", moment="actor old log-prob layer") == 43008


def test_null_gradient_checkpointing_is_verls_default_on(tiny):
    est = estimate_memory(tiny(PPO, overrides=[*SHORT, "actor_rollout_ref.model.enable_gradient_checkpointing=null",
                                               "critic.model.enable_gradient_checkpointing=null"]))
    assert set(est.candidates["update_actor"]) == set(est.candidates["update_critic"]) == \
        {"backward start", "layer recompute", "optimizer step"}


def test_host_ram_need_reads_the_final_gpu_count_and_engine(tiny):
    """2 GPUs a node instead of the profile's 4: 2 workers (6 GiB), 2 vLLM servers (4 GiB), the tied checkpoint
    loaded in both ranks (2 x 6752 B). An HF rollout has no server; SGLang has one per GPU like vLLM; the engine
    removed from the overrides is the profile's (vLLM). A critic's offload key means nothing without a critic."""
    _, parts = host_ram_need(tiny(GRPO, overrides=["trainer.n_gpus_per_node=2", "+critic.fsdp.optimizer_offload=true"]))
    assert parts == ["model loading (2 rank(s) x fp32) 13.2 KiB", "2 worker process(es) 6.0 GiB",
                     "2 rollout server(s) 4.0 GiB", "Ray head, driver, dataloader 4.0 GiB"]
    for name, servers in [("actor_rollout_ref.rollout.name=hf", False),
                          ("actor_rollout_ref.rollout.name=sglang", True), ("~actor_rollout_ref.rollout.name", True)]:
        _, parts = host_ram_need(tiny(GRPO, overrides=[name]))
        assert ("4 rollout server(s) 8.0 GiB" in parts) is servers, name


def test_no_lora_needs_no_target_modules(tiny):
    est = estimate_memory(tiny(PPO, overrides=[*SHORT, "actor_rollout_ref.model.target_modules=null"]))
    assert (est.params["lora_params"], est.params["trainable"]) == (0, 1688)

"""Memory planner: each term against its formula worked out by hand with literal numbers
(docs/preflight.md), and the knobs (FSDP sharding, LoRA, offload, checkpointing, dtypes, vLLM share)
moving the right terms."""

from __future__ import annotations

import pytest

from rlrecipes.plan.memory import GIB, estimate_memory, precision
from rlrecipes.plan.architectures import ARCHITECTURES, lora_param_count, param_count
from rlrecipes.preflight.inventory import Gpu
from rlrecipes.recipe.load import resolve

PPO, GRPO = "qwen2.5-0.5b-gsm8k-ppo", "qwen2.5-3b-gsm8k-grpo-lora"
P05 = 494_032_768  # Qwen2.5-0.5B parameters (tied embeddings)
P3 = 3_085_938_688  # Qwen2.5-3B
LORA3_R64 = 119_734_272  # rank 64 on all seven linear projections of the 3B model


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


# Peaks measured on an H200 with the allocator capped at 24 GiB (benchmarks/gpu/memory_fit.py, GPU call 1): the
# P40 recipe as shipped, real 0.5B architecture, worst-case lengths. torch.cuda.max_memory_allocated per
# verl worker call, GiB. The estimate (without its CUDA-context term, which the allocator does not see)
# must stay within 10% of each.
MEASURED_P40 = {"rollout": 11.592, "log_prob": 13.024, "update_actor": 14.297, "update_critic": 11.114}
# GPU call 3: the A100 recipe's training side on one H200 capped at 80 GiB -- 3B architecture, LoRA 64,
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


def test_unknown_model_is_reported_not_guessed(tmp_path):
    run = resolve("smoke-ppo", env={"MODELS_DIR": str(tmp_path)})  # rlrecipes/smoke-tiny: no table entry
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

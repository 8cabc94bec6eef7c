"""Per-GPU memory planner: what a verl FSDP run holds on each GPU in each phase of a training step.

A pure function of a ResolvedRun (plus the GPU it will run on). The formulas and their assumptions are
in docs/preflight.md; in short, for N data-parallel GPUs (FSDP shards every state across all of them):

    weights    params x bytes(storage dtype) / N      actor & critic fp32 master weights by default,
                                                      the reference model bf16 unless model_dtype says fp32
    gradients  trainable x 4 / N                      fp32 (reduce dtype), freed by zero_grad after update
    Adam       trainable x 8 / N                      two fp32 moments; CPU between updates when offloaded,
                                                      loaded back onto the GPU for the update itself
    LoRA       trainable = adapter params only; the frozen base stays in the actor (and is the reference)
    activations (per micro batch b, tokens s = prompt + response, both at their maximum)
               checkpointed: L x b x s x h x bytes kept + one layer recomputed: b x s x (17h + 8I) x bytes/2
               otherwise:    L x b x s x (17h + 8I) x bytes/2           (Korthikanti et al. 2022, SwiGLU,
                                                                          no dropout)
               eager attention adds L (or 1) x b x heads x s^2 x bytes x 2 (scores before/after softmax)
    logits     b x s x vocab x (bytes + 4)            lm_head output + fp32 log-softmax/entropy temporary
               b x s x vocab x 2 x bytes              with flash-attn's Triton cross-entropy (a100 image)
               verl >= 0.9 without flash-attn (padded, bf16 autocast): old log-probs b x s x vocab x (2 + 4 + 8)
               (logits + the entropy's fp32 softmax and logsumexp over every padded position; measured on an
               H200); update b x s x vocab x (2 + 2 + 4 + 2) (logits, unpadded copy, fp32 per-token
               log-softmax kept for backward, gradient); fused kernels: one 512-token chunk x vocab x 12
    rollout    vLLM / SGLang: gpu_memory_utilization x GPU memory, and the trainer state resident while it
               starts must fit in the rest; HF generate: KV cache 2 x L x kv_heads x head_dim x bytes x B x s
               (B = per-GPU rollout batch) + prefill attention scores (eager) + last-token logits

Phases: rollout, log_prob (old log-probs, reference, values: forward only), update_actor,
update_critic. The peak phase is reported with its terms, biggest first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlrecipes.fsutil import human_bytes
from rlrecipes.plan.architectures import Architecture, architecture, lora_params, param_count
from rlrecipes.recipe.load import ResolvedRun

GIB = 1024 ** 3
BYTES = {"fp32": 4, "float32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2, "half": 2}
# A CUDA context plus the caching allocator's slack per process on the GPU (measured torch 2.x figures
# are 0.3-0.6 GiB for the context alone; one process per GPU for the trainer, one more for vLLM/SGLang).
CONTEXT_GIB = 0.5
# Host RAM of the processes around the GPUs (docs/preflight.md).
WORKER_RAM_BYTES = 3 * GIB  # one Ray worker with torch + CUDA + verl imported
ENGINE_RAM_BYTES = 2 * GIB  # one vLLM/SGLang server process


@dataclass(frozen=True)
class Term:
    name: str
    bytes: float

    @property
    def gib(self) -> float:
        return self.bytes / GIB


@dataclass
class MemoryEstimate:
    gpu_memory_gib: float
    phases: dict[str, list[Term]]
    notes: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    known: bool = True  # False when the architecture is unknown (no config.json, no table entry)
    # vLLM/SGLang start while the trainer state is resident: that state must fit beside their share.
    engine_share_gib: float | None = None
    resident_at_rollout_gib: float | None = None
    moments: dict[str, str] = field(default_factory=dict)  # phase -> the moment its peak is reached
    candidates: dict[str, dict[str, list[Term]]] = field(default_factory=dict)  # phase -> moment -> terms

    def phase_gib(self, phase: str) -> float:
        return sum(t.bytes for t in self.phases[phase]) / GIB

    @property
    def peak_phase(self) -> str:
        return max(self.phases, key=self.phase_gib) if self.phases else ""

    @property
    def total_gib(self) -> float:
        return self.phase_gib(self.peak_phase) if self.phases else 0.0

    @property
    def terms(self) -> list[Term]:
        if not self.phases:
            return []
        return sorted((t for t in self.phases[self.peak_phase] if t.bytes > 0), key=lambda t: -t.bytes)

    def biggest(self, n: int = 3) -> str:
        return ", ".join(f"{t.name} {t.gib:.1f}" for t in self.terms[:n])

    def as_dict(self) -> dict[str, Any]:
        return {
            "total_gib": round(self.total_gib, 3),
            "gpu_memory_gib": round(self.gpu_memory_gib, 3),
            "peak_phase": self.peak_phase,
            "terms": [{"name": t.name, "gib": round(t.gib, 3)} for t in self.terms],
            "peak_moment": self.moments.get(self.peak_phase),
            "phases": {p: {"total_gib": round(self.phase_gib(p), 3), "moment": self.moments.get(p),
                           "terms": [{"name": t.name, "gib": round(t.gib, 3)} for t in terms if t.bytes > 0]}
                       for p, terms in self.phases.items()},
            "engine_share_gib": None if self.engine_share_gib is None else round(self.engine_share_gib, 3),
            "resident_at_rollout_gib": (None if self.resident_at_rollout_gib is None
                                        else round(self.resident_at_rollout_gib, 3)),
            "params": self.params,
            "notes": self.notes,
            "known": self.known,
        }


def _dtype_name(value: Any, default: str) -> str:
    if value is None:
        return default
    text = str(value).lower().replace("torch.", "")
    aliases = {"float32": "fp32", "float": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16"}
    return aliases.get(text, text)


@dataclass(frozen=True)
class Precision:
    """Dtypes verl will use, read from the final overrides (what decides hardware support)."""

    actor_storage: str  # FSDP flat params of the actor (model_dtype; fp32 default)
    actor_compute: str  # mixed_precision.param_dtype (bf16 default)
    ref_storage: str  # ref fsdp_config.model_dtype (bf16 default)
    critic_storage: str
    critic_compute: str
    rollout: str  # what the rollout computes in

    def used(self, use_critic: bool, separate_ref: bool) -> dict[str, str]:
        out = {"actor": self.actor_compute, "rollout": self.rollout}
        if separate_ref:
            out["reference"] = self.ref_storage
        if use_critic:
            out["critic"] = self.critic_compute
        return out


def precision(run: ResolvedRun) -> Precision:
    actor_fsdp = "actor_rollout_ref.actor.fsdp_config"
    ref_fsdp = "actor_rollout_ref.ref.fsdp_config"
    critic_fsdp = run.image.spec.critic_fsdp
    actor_storage = _dtype_name(run.get(f"{actor_fsdp}.model_dtype"), "fp32")
    actor_compute = _dtype_name(run.get(f"{actor_fsdp}.mixed_precision.param_dtype"), "bf16")
    ref_storage = _dtype_name(run.get(f"{ref_fsdp}.model_dtype"), "bf16")
    critic_storage = _dtype_name(run.get(f"{critic_fsdp}.model_dtype"), "fp32")
    critic_compute = _dtype_name(run.get(f"{critic_fsdp}.mixed_precision.param_dtype"), "bf16")
    engine = run.get("actor_rollout_ref.rollout.name", run.profile.rollout)
    if engine == "hf":
        # HF generate runs inside FSDP.summon_full_params, which hands out the full-precision (storage)
        # parameters, and calls the inner model's generate, bypassing FSDP's mixed-precision cast; the
        # bf16 autocast hard-coded in 0.5.0's hf_rollout.py is disabled by the P40 image's patch.
        rollout = actor_storage
    else:
        rollout = _dtype_name(run.get("actor_rollout_ref.rollout.dtype"), "bf16")
    return Precision(actor_storage, actor_compute, ref_storage, critic_storage, critic_compute, rollout)


def _layer_activation_bytes(arch: Architecture, tokens: float, seq: int, batch: int, nbytes: int,
                            eager: bool, inference: bool = False) -> float:
    """Activations one decoder layer keeps for backward (Korthikanti et al. 2022, adapted to SwiGLU
    without dropout: 17h + 8I values per token in 16-bit terms), plus eager attention's score matrices.
    Without autograd (`inference`) only the live tensors count: ~4h + 3I values per token."""
    if inference:
        per_token = (4 * arch.hidden + 3 * arch.intermediate) * nbytes
    else:
        per_token = (17 * arch.hidden + 8 * arch.intermediate) * nbytes / 2
    scores = batch * arch.heads * seq * seq * nbytes * 2 if eager else 0
    return tokens * per_token + scores


FUSED_CHUNK_TOKENS = 512  # verl's FusedLinearForPPO chunk


def _engine_logits(tokens: int, vocab: int, nbytes: int, name: str, backward: bool, entropy: bool,
                   fused: bool) -> list[Term]:
    """The logits of one micro batch (`tokens` = micro x sequence) in verl >= 0.9's engine without
    flash-attn (padded, under bf16 autocast).

    Forward-only with entropy (the old log-probs): the entropy is taken over every padded position with
    softmax and logsumexp, which autocast runs in fp32 -- a fp32 softmax (4 B) and logsumexp's fp32 copy
    and exponentials (8 B) per position x vocab beside the logits. These terms reproduce the allocator peak
    measured on an H200 (82.2 GiB for the 3B recipe at 32 x ~1,090 tokens; docs/bench/gpu-hopper-3b.md).
    Without entropy: the valid positions are concatenated into a copy of the logits, then
    logprobs_from_logits_v2 takes a log_softmax per token, kept in fp32 for backward. With fused kernels
    (use_fused_kernels) the logits are never whole: one 512-token chunk at a time (fp32 logits, softmax
    and gradient of the chunk)."""
    if fused:
        return [Term(f"{name} fused log-prob/entropy chunk ({FUSED_CHUNK_TOKENS} tokens x vocab, fp32)",
                     min(tokens, FUSED_CHUNK_TOKENS) * vocab * 12)]
    elements = tokens * vocab
    out = [Term(f"{name} logits", elements * nbytes)]
    if entropy:
        out += [Term(f"{name} entropy: fp32 softmax over every padded position", elements * 4),
                Term(f"{name} entropy: fp32 logsumexp temporaries", elements * 8)]
    if backward or not entropy:
        out.append(Term(f"{name} unpadded copy of the logits", elements * nbytes))
    if backward:
        out += [Term(f"{name} per-token log-softmax kept for backward (fp32)", elements * 4),
                Term(f"{name} logits gradient", elements * nbytes)]
    return out


class _Inputs:
    """What the estimate reads from a run (in its historical order: a bad value fails with the same error),
    and the per-GPU bytes of each model's states; notes on the config go to `notes`."""

    def __init__(self, run: ResolvedRun, arch: Architecture, notes: list[str]) -> None:
        self.arch = arch
        self.n_gpus = max(1, run.get("trainer.n_gpus_per_node", run.profile.gpus_per_node, kind=int)
                          * run.get("trainer.nnodes", run.profile.nnodes, kind=int))
        self.prec = prec = precision(run)
        self.params = params = param_count(arch)
        self.rank = rank = run.lora_rank
        self.lora = lora_params(run, arch)
        self.trainable = self.lora or params
        self.separate_ref = run.use_reference_policy and not rank  # LoRA: the actor without adapter is the reference
        self.use_critic = run.use_critic
        a_fsdp = "actor_rollout_ref.actor.fsdp_config"
        c_fsdp = run.image.spec.critic_fsdp
        self.actor_param_off = run.get(f"{a_fsdp}.param_offload", False, kind=bool)
        self.actor_optim_off = run.get(f"{a_fsdp}.optimizer_offload", False, kind=bool)
        self.ref_param_off = run.get("actor_rollout_ref.ref.fsdp_config.param_offload", kind=bool)
        self.critic_param_off = run.get(f"{c_fsdp}.param_offload", False, kind=bool)
        self.critic_optim_off = run.get(f"{c_fsdp}.optimizer_offload", False, kind=bool)
        self.prompt = run.get("data.max_prompt_length", kind=int)
        self.response = run.get("data.max_response_length", kind=int)
        self.seq = self.prompt + self.response
        self.n = run.get("actor_rollout_ref.rollout.n", kind=int)
        self.batch = run.get("data.train_batch_size", 1, kind=int)
        self.actor_micro = micro = run.get("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", 1, kind=int)
        self.logprob_micro = run.get("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", micro, kind=int)
        self.ref_micro = run.get("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", self.logprob_micro, kind=int)
        self.critic_micro = run.get("critic.ppo_micro_batch_size_per_gpu", micro, kind=int)
        self.actor_gc = run.get("actor_rollout_ref.model.enable_gradient_checkpointing", kind=bool)
        self.critic_gc = run.get("critic.model.enable_gradient_checkpointing", kind=bool)
        attention = str(run.get(run.image.spec.attn_key.lstrip("+"), run.profile.attention) or "")
        self.eager = attention == "eager"
        if run.get("actor_rollout_ref.actor.use_dynamic_bsz"):
            notes.append("use_dynamic_bsz is on: micro batches are packed by tokens; the estimate uses the "
                         "per-GPU micro batch sizes at full sequence length")
        self.actor_w = self.weights(params + self.lora, prec.actor_storage)
        self.actor_g = self.trainable * 4 / self.n_gpus
        self.actor_o = self.trainable * 8 / self.n_gpus
        self.ref_w = self.weights(params, prec.ref_storage) if self.separate_ref else 0.0
        self.critic_w = self.weights(params, prec.critic_storage) if self.use_critic else 0.0
        self.critic_g = params * 4 / self.n_gpus if self.use_critic else 0.0
        self.critic_o = params * 8 / self.n_gpus if self.use_critic else 0.0
        self.entropy_coeff = float(run.get("actor_rollout_ref.actor.entropy_coeff") or 0)
        self.flash_ce = run.image.flash_attn  # verl then uses flash-attn's cross-entropy
        # verl's engine (verl/workers/engine/fsdp/transformer_impl.py) without flash-attn: rlrecipes pads
        # there, and the engine's padded branch runs under bf16 autocast
        self.engine_path = run.image.spec.engine_logits and not self.flash_ce
        self.fused = bool(run.get("actor_rollout_ref.model.use_fused_kernels", False))
        self.engine = run.get("actor_rollout_ref.rollout.name", run.profile.rollout)

    def weights(self, count: int, dtype: str) -> float:  # stored in `dtype` (4 B when unknown), sharded
        return count * BYTES.get(dtype, 4) / self.n_gpus


CONTEXT_TERM = Term("CUDA context + allocator", CONTEXT_GIB * GIB)


class _Moments:
    """A phase peaks at its moment with the most memory in use; every moment considered is kept (candidates)."""

    def __init__(self) -> None:
        self.considered: list[tuple[str, list[Term]]] = []
        self.candidates: dict[str, dict[str, list[Term]]] = {}

    def peak(self, *moments: tuple[str, list[Term]]) -> tuple[str, list[Term]]:
        self.considered.extend(moments)
        return max(moments, key=lambda m: sum(t.bytes for t in m[1]))

    def record(self, phase: str) -> None:
        self.candidates[phase] = dict(self.considered)
        self.considered.clear()


def _logits(s: _Inputs, micro: int, dtype: str, name: str, backward: bool, entropy: bool) -> list[Term]:
    """lm_head output over every position (verl passes no logits_to_keep) plus what sits beside it:
    the gradient of the same size at the start of backward; for the entropy, softmax and
    softmax x logits over the response positions. Log-probs themselves are taken row by row
    (logprobs_from_logits_v2) or by flash-attn's Triton cross-entropy: no full-size copy."""
    nbytes, vocab = BYTES.get(dtype, 4), s.arch.vocab
    if s.engine_path:
        return _engine_logits(micro * s.seq, vocab, nbytes, name, backward, entropy, s.fused)
    out = [Term(f"{name} logits", micro * s.seq * vocab * nbytes)]
    if backward:
        out.append(Term(f"{name} logits gradient", micro * s.seq * vocab * nbytes))
        if nbytes < 4 and not s.flash_ce:
            # logprobs_from_logits_v2 takes a log_softmax per row in bf16/fp16; autograd keeps every
            # row's output for backward (fp32 goes through logsumexp instead, which keeps nothing new)
            out.append(Term(f"{name} log-softmax rows kept for backward", micro * s.response * vocab * nbytes))
    if entropy:
        out.append(Term(f"{name} entropy temporaries", 2 * micro * s.response * vocab * nbytes))
    return out


def _resident(s: _Inputs, skip: str) -> list[Term]:
    """States that stay on the GPU while another model (not `skip`) works; offloaded ones are on the CPU."""
    out = []
    if skip != "actor":
        out.append(Term("actor weights", 0.0 if s.actor_param_off else s.actor_w))
        out.append(Term("actor Adam state", 0.0 if s.actor_optim_off else s.actor_o))
    if s.separate_ref and skip != "ref":
        out.append(Term("reference weights", 0.0 if s.ref_param_off else s.ref_w))
    if s.use_critic and skip != "critic":
        out.append(Term("critic weights", 0.0 if s.critic_param_off else s.critic_w))
        out.append(Term("critic Adam state", 0.0 if s.critic_optim_off else s.critic_o))
    return out


def _engine_rollout(run: ResolvedRun, s: _Inputs, gpu_gib: float,
                    notes: list[str]) -> tuple[list[Term], float, float]:
    """vLLM / SGLang beside the trainer state: (rollout terms, engine share in bytes, resident GiB)."""
    util = run.get("actor_rollout_ref.rollout.gpu_memory_utilization", kind=float)
    tp = run.get("actor_rollout_ref.rollout.tensor_model_parallel_size", 1, kind=int)
    engine, engine_share = s.engine, util * gpu_gib * GIB
    state = _resident(s, "")
    resident_rollout = (sum(t.bytes for t in state) + CONTEXT_TERM.bytes) / GIB
    terms = [*state, CONTEXT_TERM, Term(f"{engine} gpu_memory_utilization {util:g} x {gpu_gib:g} GiB "
                                        f"(weights/TP{tp}, KV cache, graphs)", engine_share),
             Term(f"{engine} process CUDA context", CONTEXT_GIB * GIB)]
    notes.append(f"{engine} reserves gpu_memory_utilization x total GPU memory when it starts; the trainer "
                 "state resident at that moment must fit in the rest")
    if run.get("actor_rollout_ref.rollout.free_cache_engine") is False:
        notes.append("free_cache_engine is off: the engine keeps its share during the update phases")
    return terms, engine_share, resident_rollout


def _hf_rollout(run: ResolvedRun, s: _Inputs, moments: _Moments, notes: list[str]) -> tuple[str, list[Term]]:
    """HF generate inside the actor's FSDP module: the peak of prefill and the end of decoding."""
    arch, prompt, seq = s.arch, s.prompt, s.seq
    gen_micro = run.get("actor_rollout_ref.rollout.micro_batch_size")
    per_gpu = max(1, s.batch * s.n // s.n_gpus)
    g = min(per_gpu, int(gen_micro)) if gen_micro else per_gpu
    nbytes = BYTES.get(s.prec.rollout, 4)
    kv_token = 2 * arch.layers * arch.kv_heads * arch.head_dim * nbytes * g
    state = _resident(s, "")
    if s.actor_param_off:  # HF generate runs the actor's FSDP module: it is loaded for the rollout
        state = [Term("actor weights", s.actor_w) if t.name == "actor weights" else t for t in state]
    state = [*state, CONTEXT_TERM]
    hidden = g * prompt * arch.hidden * nbytes
    # prefill, per layer: attention (eager: score-sized buffers, 3 alive at the peak as measured; Q and
    # K/V repeated to every head) or the MLP (gate/up/activation outputs), whichever is bigger, beside
    # the prompt's KV cache
    attn = (g * arch.heads * prompt * prompt * nbytes * 3 if s.eager else 0) \
        + 3 * g * arch.heads * prompt * arch.head_dim * nbytes
    mlp = 3 * g * prompt * arch.intermediate * nbytes
    transient = Term("prefill attention scores + heads (eager)" if s.eager and attn >= mlp else
                     ("prefill attention" if attn >= mlp else "prefill MLP activations"), max(attn, mlp) + hidden)
    # end of decoding: the full KV cache, plus one layer's K/V repeated to every attention head
    # (transformers' repeat_kv: SDPA and eager expand GQA heads whenever there is a padding mask)
    peak = moments.peak(
        ("prefill", [*state, Term(f"KV cache ({g} sequences x {prompt} prompt tokens)", kv_token * prompt),
                     transient]),
        ("end of decoding", [*state, Term(f"KV cache (HF generate, {g} sequences x {seq} tokens)", kv_token * seq),
                             Term("one layer's K/V repeated to every head",
                                  kv_token * seq / arch.layers * arch.heads / arch.kv_heads),
                             Term("sampling logits (last token, fp32)", g * arch.vocab * 4 * 3)]))
    notes.append(f"HF rollout generates {g} sequences per GPU at once (set "
                 "+actor_rollout_ref.rollout.micro_batch_size to chunk it)")
    return peak


def _log_prob(s: _Inputs, moments: _Moments) -> tuple[str, list[Term]]:
    """Forward-only passes: old log-probs (with entropy, for the metrics) and reference log-probs."""
    passes = [(s.logprob_micro, "actor old log-prob", s.prec.actor_compute, True)]
    if s.separate_ref:
        passes.append((s.ref_micro, "reference log-prob", s.prec.ref_storage, False))
    passes_moments = []
    for micro, name, dtype, entropy in passes:
        nbytes = BYTES.get(dtype, 4)
        live = _layer_activation_bytes(s.arch, micro * s.seq, s.seq, micro, nbytes, s.eager, inference=True)
        extra = []
        if name.startswith("reference") and s.ref_param_off:
            extra.append(Term("reference weights (loaded for its pass)", s.ref_w))
        held = [*_resident(s, ""), CONTEXT_TERM, *extra]
        passes_moments.append((f"{name} logits", [*held, *_logits(s, micro, dtype, f"{name} (micro {micro})", False,
                                                                   entropy)]))
        passes_moments.append((f"{name} layer", [*held, Term(f"{name} layer (micro {micro})", live)]))
    return moments.peak(*passes_moments)


def _update(s: _Inputs, moments: _Moments, name: str, micro: int, gc: bool, dtype: str, states: list[Term],
            trainable_n: int, with_logits: bool) -> tuple[str, list[Term]]:
    """One model's update: the peak of the start of backward, the layer recompute (checkpointing only)
    and the optimizer step, each beside `states` (weights, gradients, Adam state and the others' states)."""
    arch, nbytes, tokens = s.arch, BYTES.get(dtype, 4), micro * s.seq
    layer = Term(f"{name} recomputed layer (micro {micro})",
                 _layer_activation_bytes(arch, tokens, s.seq, micro, nbytes, s.eager))
    head = _logits(s, micro, dtype, f"{name} (micro {micro})", backward=True,
                   entropy=with_logits and s.entropy_coeff != 0) if with_logits else []
    # torch's foreach Adam allocates one parameter-sized fp32 temporary at the step
    step = ("optimizer step", [*states, Term(f"{name} Adam step temporary", trainable_n * 4 / s.n_gpus)])
    if gc:
        kept = Term(f"{name} checkpointed layer inputs (micro {micro})", arch.layers * tokens * arch.hidden * nbytes)
        return moments.peak(("backward start", [*states, kept, *head]), ("layer recompute", [*states, kept, layer]),
                            step)
    full = Term(f"{name} activations of {arch.layers} layers (micro {micro}, no checkpointing)",
                arch.layers * layer.bytes)
    return moments.peak(("backward start", [*states, full, *head]), step)


# The updates: the model's weights, gradients (kept across the micro batches of a mini batch) and Adam state
# are on the GPU (an offloaded optimizer is loaded back for the update).
def _update_actor(s: _Inputs, moments: _Moments) -> tuple[str, list[Term]]:
    lora = " (LoRA)" if s.lora else ""
    states = [*_resident(s, "actor"), CONTEXT_TERM, Term("actor weights", s.actor_w),
              Term("actor gradients" + lora, s.actor_g),
              Term("actor Adam state" + lora + (" (loaded from CPU)" if s.actor_optim_off else ""), s.actor_o)]
    return _update(s, moments, "actor", s.actor_micro, s.actor_gc, s.prec.actor_compute, states, s.trainable,
                   with_logits=True)


def _update_critic(s: _Inputs, moments: _Moments) -> tuple[str, list[Term]]:
    states = [*_resident(s, "critic"), CONTEXT_TERM, Term("critic weights", s.critic_w),
              Term("critic gradients", s.critic_g),
              Term("critic Adam state" + (" (loaded from CPU)" if s.critic_optim_off else ""), s.critic_o)]
    return _update(s, moments, "critic", s.critic_micro, s.critic_gc, s.prec.critic_compute, states, s.params,
                   with_logits=False)


def estimate_memory(run: ResolvedRun, inventory_gpu: Any = None) -> MemoryEstimate:
    """Per-GPU peak estimate. `inventory_gpu`: a detected GPU (anything with `memory_mib`) to plan
    against; default the profile's GPU."""
    if inventory_gpu is not None and getattr(inventory_gpu, "memory_mib", None):
        gpu_gib = float(inventory_gpu.memory_mib) / 1024
    else:
        gpu_gib = float(run.profile.gpu.memory_gib)
    arch = architecture(run)
    if arch is None:
        return MemoryEstimate(gpu_gib, {}, notes=[f"unknown architecture for {run.recipe.model.hub_id}: no "
                                                  f"config.json in {run.model_path} and no entry in "
                                                  "rlrecipes.plan.architectures.ARCHITECTURES"], known=False)
    notes: list[str] = []
    s = _Inputs(run, arch, notes)
    tracked = _Moments()
    phases: dict[str, list[Term]] = {}
    moments: dict[str, str] = {}
    engine_share = resident_rollout = None
    if s.engine in ("vllm", "sglang"):
        phases["rollout"], engine_share, resident_rollout = _engine_rollout(run, s, gpu_gib, notes)
        moments["rollout"] = "generation"
    else:
        moments["rollout"], phases["rollout"] = _hf_rollout(run, s, tracked, notes)
        tracked.record("rollout")
    moments["log_prob"], phases["log_prob"] = _log_prob(s, tracked)
    tracked.record("log_prob")
    moments["update_actor"], phases["update_actor"] = _update_actor(s, tracked)
    tracked.record("update_actor")
    if s.use_critic:
        moments["update_critic"], phases["update_critic"] = _update_critic(s, tracked)
        tracked.record("update_critic")
    reference = "separate" if s.separate_ref else ("actor without adapter" if s.rank and run.use_reference_policy
                                                   else "none")
    return MemoryEstimate(
        gpu_memory_gib=gpu_gib, phases=phases, notes=notes,
        params={"architecture": arch.name, "params": s.params, "lora_params": s.lora, "trainable": s.trainable,
                "n_gpus": s.n_gpus, "sequence_tokens": s.seq, "precision": s.prec.__dict__,
                "reference": reference, "critic": s.use_critic},
        engine_share_gib=None if engine_share is None else engine_share / GIB,
        resident_at_rollout_gib=resident_rollout, moments=moments, candidates=tracked.candidates,
    )


def host_ram_need(run: ResolvedRun) -> tuple[float, list[str]]:
    """Rough host RAM a run needs: offloaded state + model loading + worker processes (docs/preflight.md)."""
    arch = architecture(run)
    per_node = int(run.get("trainer.n_gpus_per_node", run.profile.gpus_per_node))
    nnodes = int(run.get("trainer.nnodes", run.profile.nnodes))
    share = 1 / max(1, nnodes)  # FSDP shards across nodes: one node holds its share
    parts: list[tuple[str, float]] = []
    if arch is not None:
        params = param_count(arch)
        trainable = lora_params(run, arch) or params
        c_fsdp = run.image.spec.critic_fsdp
        if run.get("actor_rollout_ref.actor.fsdp_config.optimizer_offload"):
            parts.append(("actor Adam state offloaded", trainable * 8 * share))
        if run.get("actor_rollout_ref.actor.fsdp_config.param_offload"):
            parts.append(("actor weights offloaded", params * 4 * share))
        if run.use_reference_policy and not run.lora_rank and run.get("actor_rollout_ref.ref.fsdp_config.param_offload"):
            parts.append(("reference weights offloaded", params * 4 * share))
        if run.use_critic and run.get(f"{c_fsdp}.optimizer_offload"):
            parts.append(("critic Adam state offloaded", params * 8 * share))
        if run.use_critic and run.get(f"{c_fsdp}.param_offload"):
            parts.append(("critic weights offloaded", params * 4 * share))
        # verl loads the full checkpoint on the CPU in every rank when embeddings are tied (no meta-device
        # init then), else in rank 0 only; fp32 for the actor.
        loaders = per_node if arch.tie_embeddings else 1
        parts.append((f"model loading ({loaders} rank(s) x fp32)", params * 4 * loaders))
    parts.append((f"{per_node} worker process(es)", per_node * WORKER_RAM_BYTES))
    if run.get("actor_rollout_ref.rollout.name", run.profile.rollout) in ("vllm", "sglang"):
        parts.append((f"{per_node} rollout server(s)", per_node * ENGINE_RAM_BYTES))
    parts.append(("Ray head, driver, dataloader", 4 * GIB))
    return sum(b for _, b in parts), [f"{what} {human_bytes(b)}" for what, b in parts]

"""GPU checks: inventory, count, tensor parallelism, driver, the image's kernels, compute dtype,
attention, rollout engine, Triton users and the per-GPU memory estimate. Capability rules are data
(the tables below) that the detected inventory is checked against."""

from __future__ import annotations

import math

from rlrecipes.plan.memory import MemoryEstimate, precision
from rlrecipes.preflight.checks.base import FAIL, PASS, WARN, Check, Context, _cc_known, _cc_text, _engine, _no_gpu
from rlrecipes.plan.architectures import architecture
from rlrecipes.recipe.load import ResolvedRun
from rlrecipes.verl.specs import attention_keys

# ------------------------------------------------------------------------------ capability data
# Minimum compute capability of each feature: bf16 tensor cores and FlashAttention-2 need Ampere (sm_80;
# FlashAttention's README: "Ampere, Ada, or Hopper GPUs"); vLLM needs Volta (its GPU installation docs:
# compute capability 7.0 or higher), SGLang sm_75; Triton -- and so torch.compile/inductor, Liger, fused
# kernels -- Volta (torch's inductor refuses older GPUs: "Triton only supports devices of CUDA Capability >= 7.0").
MIN_CC = {
    "bf16": (8, 0),
    "flash_attention_2": (8, 0),
    "vllm": (7, 0),
    "sglang": (7, 5),
    "triton": (7, 0),
}
# Oldest driver branch per CUDA major version (CUDA minor-version compatibility); below the image's
# own `min_driver` (the branch its CUDA release shipped with) a run works, but PTX JIT does not.
CUDA_FAMILY_MIN_DRIVER = {11: 450, 12: 525, 13: 580}


# ------------------------------------------------------------------------------------- GPUs
def check_gpu_inventory(ctx: Context) -> Check:
    inv = ctx.inventory
    if not inv.gpus:
        return Check("gpu-inventory", FAIL, f"no GPU detected: {inv.error or 'empty inventory'}",
                     "run where the NVIDIA driver and GPUs are visible (docker run --gpus all, or the compose "
                     "GPU reservation); to plan on another machine pass --gpu-inventory FILE.json")
    kinds = {(g.name, g.memory_mib, g.compute_capability) for g in inv.gpus}
    if len(kinds) > 1:
        return Check("gpu-inventory", WARN, f"mixed GPUs: {inv.describe()} (via {inv.source}); the smallest and "
                     "oldest decide every check", "set CUDA_VISIBLE_DEVICES to GPUs of one kind")
    profile_gpu = ctx.run.profile.gpu
    message = f"{inv.describe()} (via {inv.source})"
    if inv.gpus[0].cc and profile_gpu.compute_capability and inv.gpus[0].compute_capability != \
            profile_gpu.compute_capability and "any" not in profile_gpu.name:
        message += f"; profile {ctx.run.profile.name} was written for {profile_gpu.name}"
    return Check("gpu-inventory", PASS, message)


def check_gpu_count(ctx: Context) -> Check:
    skip = _no_gpu("gpu-count", ctx)
    if skip:
        return skip
    run = ctx.run
    per_node = int(run.get("trainer.n_gpus_per_node", run.profile.gpus_per_node))
    nnodes = int(run.get("trainer.nnodes", run.profile.nnodes))
    have = ctx.inventory.count
    total = f" ({nnodes} nodes x {per_node} = {nnodes * per_node})" if nnodes > 1 else ""
    if have < per_node:
        return Check("gpu-count", FAIL, f"the run needs {per_node} GPUs per node (trainer.n_gpus_per_node={per_node})"
                     f"{total}, this host has {have}",
                     f"use a profile for {have} GPU(s) (--profile) or override trainer.n_gpus_per_node={have} "
                     "(keep batch sizes divisible by it)")
    if have > per_node:
        return Check("gpu-count", PASS, f"uses {per_node} of the {have} GPUs on this host{total}")
    return Check("gpu-count", PASS, f"{per_node} GPU(s) per node requested, {have} present{total}")


def check_tensor_parallel(ctx: Context) -> Check:
    skip = _no_gpu("tensor-parallel", ctx)
    if skip:
        return skip
    run = ctx.run
    tp = int(run.get("actor_rollout_ref.rollout.tensor_model_parallel_size", run.profile.tensor_parallel) or 1)
    per_node = int(run.get("trainer.n_gpus_per_node", run.profile.gpus_per_node))
    world = per_node * int(run.get("trainer.nnodes", run.profile.nnodes))
    have = ctx.inventory.count
    key = "actor_rollout_ref.rollout.tensor_model_parallel_size"
    if tp < 1:
        return Check("tensor-parallel", FAIL, f"{key}={tp} must be >= 1", f"set {key}=1")
    if _engine(run) == "hf" and tp > 1:
        return Check("tensor-parallel", WARN, f"HF rollout ignores tensor parallelism ({key}={tp})", f"set {key}=1")
    if tp > have:
        return Check("tensor-parallel", FAIL, f"tensor parallel {tp} needs {tp} GPUs on one node, this host has {have}",
                     f"override {key}={max(1, have)} (a model that fits one GPU is fastest at TP 1)")
    if tp > per_node:
        return Check("tensor-parallel", FAIL, f"tensor parallel {tp} is larger than trainer.n_gpus_per_node={per_node}",
                     f"override {key}={per_node} or fewer")
    if world % tp:
        return Check("tensor-parallel", FAIL, f"{world} GPUs are not divisible into tensor-parallel groups of {tp}",
                     f"choose {key} from the divisors of {world}")
    arch = architecture(run)
    if arch is not None and arch.heads % tp:
        return Check("tensor-parallel", FAIL, f"{arch.heads} attention heads are not divisible by tensor parallel {tp}",
                     f"choose {key} from the divisors of {arch.heads}")
    return Check("tensor-parallel", PASS, f"TP {tp}: {world // tp} rollout replica(s) over {world} GPU(s)")


def check_compute_dtype(ctx: Context) -> Check:
    skip = _cc_known("compute-dtype", ctx)
    if skip:
        return skip
    run, gpu = ctx.run, ctx.gpu
    prec = precision(run)
    used = prec.used(run.use_critic, run.use_reference_policy and not run.lora_rank)
    bf16 = sorted(role for role, dtype in used.items() if dtype == "bf16")
    fp16 = sorted(role for role, dtype in used.items() if dtype == "fp16")
    if bf16 and gpu.cc < MIN_CC["bf16"]:
        return Check("compute-dtype", FAIL,
                     f"bf16 needs compute capability >= 8.0 (sm_80); {gpu.name} is {gpu.sm}: {', '.join(bf16)} would "
                     "compute in bf16 (torch may report bf16 as supported through emulation; the compute "
                     "capability decides)",
                     "use an FP32 profile (--profile p40-24gb or any-1gpu), or set "
                     "+actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=fp32 and the model_dtype "
                     "keys to fp32 (docs/preflight.md)")
    if fp16 and gpu.cc[0] == 6:
        return Check("compute-dtype", WARN, f"fp16 runs at 1/64 of the fp32 rate on {gpu.name} ({gpu.sm}): "
                     f"{', '.join(fp16)}", "use fp32 on Pascal")
    summary = ", ".join(f"{role} {dtype}" for role, dtype in sorted(used.items()))
    return Check("compute-dtype", PASS, f"{summary} on {gpu.sm}")


def check_attention(ctx: Context) -> Check:
    skip = _cc_known("attention", ctx)
    if skip:
        return skip
    run, gpu = ctx.run, ctx.gpu
    keys = attention_keys(run.image.spec)
    key = keys[0]
    attn = next((value for value in (run.get(k) for k in keys) if value is not None), None)
    attn = str(attn or "flash_attention_2")  # verl's default for actor, reference and critic
    has_fa = run.image.flash_attn
    rmpad = [k for k in ("actor_rollout_ref.model.use_remove_padding", "critic.model.use_remove_padding")
             if run.get(k) and (k.startswith("actor") or run.use_critic)]
    if attn == "flash_attention_2":
        if gpu.cc < MIN_CC["flash_attention_2"]:
            return Check("attention", FAIL, f"FlashAttention-2 needs compute capability >= 8.0; {gpu.name} is {gpu.sm}",
                         f"override +{key}=sdpa (or eager), or use a profile with attention: sdpa")
        if not has_fa:
            return Check("attention", FAIL, f"attention is flash_attention_2 but image {run.image.name!r} has no flash-attn",
                         f"override +{key}=eager or sdpa")
    # padding removal without FlashAttention never gets here: resolve() refuses it (values.check_packing), and
    # with flash_attention_2 the checks above already need sm_80+ and flash-attn in the image
    kernels = " (math and memory-efficient SDPA kernels)" if attn == "sdpa" and gpu.cc < (8, 0) else ""
    return Check("attention", PASS, f"{attn}{kernels} on {gpu.sm}" + (", padding removal on" if rmpad else ""))


def check_rollout_engine(ctx: Context) -> Check:
    run = ctx.run
    engine = _engine(run)
    image = run.image
    if engine == "hf" and not image.spec.hf_rollout:
        return Check("rollout-engine", FAIL, f"HF generate rollout exists only in verl <= 0.5.0; image "
                     f"{image.name!r} has verl {image.verl}", "actor_rollout_ref.rollout.name=vllm")
    if engine not in image.rollout_engines:
        return Check("rollout-engine", FAIL, f"rollout engine {engine!r} is not installed in image {image.name!r} "
                     f"(it has {', '.join(image.rollout_engines)})",
                     f"actor_rollout_ref.rollout.name={image.rollout_engines[0]} or a profile whose image has {engine}")
    skip = _cc_known("rollout-engine", ctx)
    if skip:
        return skip
    gpu = ctx.gpu
    need = MIN_CC.get(engine)
    if need and gpu.cc < need:
        label = {"vllm": "vLLM", "sglang": "SGLang"}[engine]
        return Check("rollout-engine", FAIL, f"{label} needs compute capability >= {need[0]}.{need[1]}; {gpu.name} is "
                     f"{gpu.sm}", "use HF generate rollout on verl 0.5.0 (--profile p40-24gb / any-1gpu)")
    return Check("rollout-engine", PASS, f"{engine} on {gpu.sm}")


def check_triton(ctx: Context) -> Check:
    skip = _cc_known("triton", ctx)
    if skip:
        return skip
    run, gpu = ctx.run, ctx.gpu
    users = []
    if run.get("actor_rollout_ref.actor.use_torch_compile") is not False:
        users.append("torch.compile (actor_rollout_ref.actor.use_torch_compile, on by default)")
    if run.get("actor_rollout_ref.ref.use_torch_compile") is True:
        users.append("torch.compile (actor_rollout_ref.ref.use_torch_compile)")
    if run.get("actor_rollout_ref.model.use_liger"):
        users.append("Liger kernels (actor_rollout_ref.model.use_liger)")
    if run.get("actor_rollout_ref.model.use_fused_kernels"):
        users.append("fused kernels (actor_rollout_ref.model.use_fused_kernels)")
    if run.image.flash_attn:
        users.append(f"flash-attn's Triton cross-entropy (installed in image {run.image.name!r})")
    if users and gpu.cc < MIN_CC["triton"]:
        return Check("triton", FAIL, f"Triton needs compute capability >= 7.0; {gpu.name} is {gpu.sm}, used by: "
                     f"{'; '.join(users)}",
                     "actor_rollout_ref.actor.use_torch_compile=False, no Liger/fused kernels, and an image without "
                     "flash-attn (the p40 image)")
    return Check("triton", PASS, f"{len(users)} Triton user(s) on {gpu.sm}" if users else "no Triton user")


def check_image_arch(ctx: Context) -> Check:
    skip = _cc_known("image-arch", ctx)
    if skip:
        return skip
    image, gpu = ctx.run.image, ctx.gpu
    need = _version_tuple(image.kernels_min_capability)
    if gpu.cc < need:
        return Check("image-arch", FAIL, f"torch {image.torch} for CUDA {image.cuda} in image {image.name!r} has no kernels "
                     f"for {gpu.sm} ({gpu.name}); it needs {_cc_text(need)} or newer",
                     "use the p40 image (torch 2.6.0+cu118 keeps Pascal kernels) via --profile p40-24gb or any-1gpu")
    return Check("image-arch", PASS, f"image {image.name!r} (torch {image.torch}, CUDA {image.cuda}) runs on {gpu.sm}")


def _version_tuple(text: str) -> tuple[int, ...]:
    out = []
    for part in text.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        out.append(int(digits))
    return tuple(out)


def check_driver(ctx: Context) -> Check:
    skip = _no_gpu("driver", ctx)
    if skip:
        return skip
    image = ctx.run.image
    driver = ctx.inventory.driver_version
    if not driver:
        return Check("driver", WARN, f"driver version unknown; image {image.name!r} needs CUDA {image.cuda} "
                     f"(driver >= {image.min_driver})", "add driver_version to the inventory file")
    branch = _version_tuple(driver)[0]
    cuda_major = _version_tuple(image.cuda)[0]
    floor = CUDA_FAMILY_MIN_DRIVER.get(cuda_major, 0)
    shipped = _version_tuple(image.min_driver)[0]
    if branch < floor:
        return Check("driver", FAIL, f"driver {driver} is too old for CUDA {image.cuda} in image {image.name!r} "
                     f"(CUDA {cuda_major}.x needs driver >= {floor})",
                     f"install driver >= {image.min_driver} on the host (or use the p40 image, CUDA 11.8, >= 520)")
    cuda = ctx.inventory.cuda_driver_version
    if branch < shipped or (cuda and _version_tuple(cuda) < _version_tuple(image.cuda)[:2]):
        return Check("driver", WARN, f"driver {driver}{f' (CUDA {cuda})' if cuda else ''} is older than CUDA "
                     f"{image.cuda}'s own driver ({image.min_driver}): it runs through minor-version compatibility, "
                     "but PTX JIT-compiled kernels fail", f"install driver >= {image.min_driver}")
    return Check("driver", PASS, f"driver {driver} runs CUDA {image.cuda} (needs >= {image.min_driver})")


# ----------------------------------------------------------------------------------- memory
def _memory_fix(est: MemoryEstimate, run: ResolvedRun) -> str:
    biggest = est.terms[0].name if est.terms else ""
    if "logits" in biggest or "activations" in biggest or "layer" in biggest:
        return ("lower the micro batches (actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu, "
                "*.log_prob_micro_batch_size_per_gpu) or data.max_response_length; gradient accumulation keeps the maths")
    if "Adam" in biggest or "gradients" in biggest or "weights" in biggest:
        return ("offload (offload: {param: true, optimizer: true} in the profile), use LoRA "
                "(actor_rollout_ref.model.lora_rank), more GPUs, or a smaller model")
    if "KV cache" in biggest or "prefill" in biggest:
        return "chunk generation: +actor_rollout_ref.rollout.micro_batch_size=16 (or lower data.train_batch_size)"
    if "gpu_memory_utilization" in biggest:
        return "lower actor_rollout_ref.rollout.gpu_memory_utilization"
    return "see `rlrecipes plan --memory` for the terms"


def check_gpu_memory(ctx: Context) -> Check:
    run = ctx.run
    est = ctx.estimate
    if not est.known:
        return Check("gpu-memory", WARN, f"not estimated: {'; '.join(est.notes)}",
                     "download the model first (rlrecipes model) so its config.json can be read")
    gpu = ctx.inventory.smallest()
    where = f"{gpu.name} ({gpu.memory_gib:.0f} GiB)" if gpu else \
        f"the profile's {run.profile.gpu.name} ({run.profile.gpu.memory_gib:g} GiB; no inventory)"
    mem = est.gpu_memory_gib
    biggest = est.biggest(3)
    if est.engine_share_gib is not None:
        util = est.engine_share_gib / mem
        room = mem - est.engine_share_gib
        if est.resident_at_rollout_gib > room:
            fits = max(0.05, math.floor((1 - (est.resident_at_rollout_gib + 1) / mem) * 20) / 20)
            return Check("gpu-memory", FAIL, f"{_engine(run)} takes gpu_memory_utilization {util:.2f} x {mem:.0f} GiB = "
                         f"{est.engine_share_gib:.1f} GiB; the trainer state resident when it starts "
                         f"({est.resident_at_rollout_gib:.1f} GiB) does not fit in the other {room:.1f} GiB on {where}",
                         f"actor_rollout_ref.rollout.gpu_memory_utilization={fits:.2f}, or offload parameters/optimizer")
    if est.total_gib > mem:
        return Check("gpu-memory", FAIL, f"~{est.total_gib:.1f} GiB per GPU at peak ({est.peak_phase}) > {mem:.1f} GiB on "
                     f"{where}; biggest (GiB): {biggest}", _memory_fix(est, run))
    if est.total_gib > 0.9 * mem:
        return Check("gpu-memory", WARN, f"~{est.total_gib:.1f} GiB per GPU at peak ({est.peak_phase}) is over 90% of "
                     f"{mem:.1f} GiB on {where}; biggest (GiB): {biggest}", _memory_fix(est, run))
    return Check("gpu-memory", PASS, f"~{est.total_gib:.1f} of {mem:.1f} GiB per GPU at peak ({est.peak_phase}) on "
                 f"{where}; biggest (GiB): {biggest}")

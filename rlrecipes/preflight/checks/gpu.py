"""The preflight checks: each a function of (ResolvedRun, Inventory, HostFacts) returning Check(s) with
pass / warn / fail, a one-line reason and the fix. Capability rules are data (the tables below) that
the detected inventory is checked against; nothing here imports torch or verl.

Model, data and checkpoint checks read the run's own directories (they are what is being checked);
everything about the host comes in through HostFacts.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlrecipes.fsutil import human_bytes
from rlrecipes.memory import GIB, IMAGE_FLASH_ATTN, MemoryEstimate, estimate_memory, lookup, precision
from rlrecipes.preflight.host import HostFacts
from rlrecipes.preflight.inventory import Gpu, Inventory
from rlrecipes.recipe import ResolvedRun, _version_keys

PASS, WARN, FAIL = "pass", "warn", "fail"

# ------------------------------------------------------------------------------ capability data
# Minimum compute capability of each feature (FACTS.md: bf16 and FlashAttention-2 need Ampere; vLLM
# needs Volta, SGLang sm_75; Triton -- and so torch.compile/inductor, Liger, fused kernels -- Volta).
MIN_CC = {
    "bf16": (8, 0),
    "flash_attention_2": (8, 0),
    "vllm": (7, 0),
    "sglang": (7, 5),
    "triton": (7, 0),
}
# What the images ship (docker/*.Dockerfile): flash-attn is kept out of the P40 image on purpose
# (verl would route through its Triton cross-entropy otherwise). torch 2.8.0+cu128 (a100 image) has
# no Pascal kernels: cu128 builds dropped sm_50-sm_61; torch 2.6.0+cu118 (p40 image) covers sm_50+.
IMAGE_MIN_CC = {"a100": (7, 0), "p40": (5, 0)}
# Oldest driver branch per CUDA major version (CUDA minor-version compatibility); below the image's
# own `min_driver` (the branch its CUDA release shipped with) a run works, but PTX JIT does not.
CUDA_FAMILY_MIN_DRIVER = {11: 450, 12: 525, 13: 580}
SHM_FAIL_BYTES = 1 * GIB  # Docker's default is 64 MB
SHM_ADVISED_BYTES = 10 * GIB  # verl's docs run containers with --shm-size=10g or more
NOFILE_ADVISED = 65536  # Ray's recommendation
NOFILE_MIN = 4096
WORKER_RAM_BYTES = 3 * GIB  # one Ray worker with torch + CUDA + verl imported
ENGINE_RAM_BYTES = 2 * GIB  # one vLLM/SGLang server process


@dataclass
class Check:
    name: str
    status: str  # pass | warn | fail
    message: str
    fix: str = ""

    def as_dict(self) -> dict:
        return {"check": self.name, "status": self.status, "message": self.message, "fix": self.fix}


@dataclass
class Context:
    run: ResolvedRun
    inventory: Inventory
    host: HostFacts
    _cache: dict = field(default_factory=dict)

    @property
    def gpu(self) -> Gpu | None:
        """The GPU that decides: the oldest (capabilities) -- checks of memory use the smallest."""
        return self.inventory.lowest_cc()

    @property
    def estimate(self) -> MemoryEstimate:
        if "estimate" not in self._cache:
            self._cache["estimate"] = estimate_memory(self.run, self.inventory.smallest())
        return self._cache["estimate"]

    @property
    def plan(self) -> dict:
        if "plan" not in self._cache:
            from rlrecipes.plan import build_plan

            self._cache["plan"] = build_plan(self.run)
        return self._cache["plan"]


def _cc_text(cc: tuple[int, int]) -> str:
    return f"sm_{cc[0]}{cc[1]}"


def _engine(run: ResolvedRun) -> str:
    return str(run.get("actor_rollout_ref.rollout.name", run.profile.rollout))


def _no_gpu(name: str, ctx: Context) -> Check | None:
    if ctx.inventory.gpus:
        return None
    return Check(name, WARN, "not checked: no GPU inventory", "see the gpu-inventory check")


def _cc_known(name: str, ctx: Context) -> Check | None:
    skip = _no_gpu(name, ctx)
    if skip:
        return skip
    if ctx.gpu is None:
        return Check(name, WARN, "not checked: the GPUs' compute capability is unknown",
                     "pass --gpu-inventory FILE.json with compute_capability, or update the driver")
    return None


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
    from rlrecipes.plan import architecture

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


def _attention_keys(run: ResolvedRun) -> list[str]:
    own = _version_keys(run.image.verl)["attn"].lstrip("+")
    other = _version_keys("0.5.0" if not run.image.verl.startswith("0.5.") else "0.8.0")["attn"].lstrip("+")
    return [own, other]


def check_attention(ctx: Context) -> Check:
    skip = _cc_known("attention", ctx)
    if skip:
        return skip
    run, gpu = ctx.run, ctx.gpu
    key = _attention_keys(run)[0]
    attn = lookup(run, key)
    if attn is None:
        attn = lookup(run, _attention_keys(run)[1])
    attn = str(attn or "flash_attention_2")  # verl's default for actor, reference and critic
    has_fa = IMAGE_FLASH_ATTN.get(run.image.name, True)
    rmpad = [k for k in ("actor_rollout_ref.model.use_remove_padding", "critic.model.use_remove_padding")
             if run.get(k) and (k.startswith("actor") or run.use_critic)]
    if attn == "flash_attention_2":
        if gpu.cc < MIN_CC["flash_attention_2"]:
            return Check("attention", FAIL, f"FlashAttention-2 needs compute capability >= 8.0; {gpu.name} is {gpu.sm}",
                         f"override +{key}=sdpa (or eager), or use a profile with attention: sdpa")
        if not has_fa:
            return Check("attention", FAIL, f"attention is flash_attention_2 but image {run.image.name!r} has no flash-attn",
                         f"override +{key}=eager or sdpa")
    if rmpad and (gpu.cc < MIN_CC["flash_attention_2"] or not has_fa):
        why = f"{gpu.name} is {gpu.sm}" if gpu.cc < MIN_CC["flash_attention_2"] else \
            f"image {run.image.name!r} has no flash-attn"
        return Check("attention", FAIL, f"{', '.join(k + '=True' for k in rmpad)} goes through flash-attn's "
                     f"unpadding kernels; {why}", " ".join(f"{k}=False" for k in rmpad))
    kernels = " (math and memory-efficient SDPA kernels)" if attn == "sdpa" and gpu.cc < (8, 0) else ""
    return Check("attention", PASS, f"{attn}{kernels} on {gpu.sm}" + (", padding removal on" if rmpad else ""))


def check_rollout_engine(ctx: Context) -> Check:
    run = ctx.run
    engine = _engine(run)
    image = run.image
    if engine == "hf" and not image.verl.startswith("0.5."):
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
    if run.get("actor_rollout_ref.actor.use_torch_compile", True) is not False:
        users.append("torch.compile (actor_rollout_ref.actor.use_torch_compile, on by default)")
    if run.get("actor_rollout_ref.ref.use_torch_compile") is True:
        users.append("torch.compile (actor_rollout_ref.ref.use_torch_compile)")
    if run.get("actor_rollout_ref.model.use_liger"):
        users.append("Liger kernels (actor_rollout_ref.model.use_liger)")
    if run.get("actor_rollout_ref.model.use_fused_kernels"):
        users.append("fused kernels (actor_rollout_ref.model.use_fused_kernels)")
    if IMAGE_FLASH_ATTN.get(run.image.name, True):
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
    need = IMAGE_MIN_CC.get(image.name, (0, 0))
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


# ------------------------------------------------------------------------------------- host
def _dir_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


def _existing_checkpoint_bytes(ckpt_dir: Path) -> tuple[int, int]:
    """(bytes, count) of the step directories already under the run's checkpoint dir."""
    from rlrecipes.watchdog.layout import STEP_DIR_RE

    total, count = 0, 0
    try:
        entries = list(os.scandir(ckpt_dir))
    except OSError:
        return 0, 0
    for entry in entries:
        if STEP_DIR_RE.match(entry.name) and entry.is_dir(follow_symlinks=False):
            total += _dir_bytes(Path(entry.path))
            count += 1
    return total, count


def _model_present(path: Path) -> bool:
    return (path / "config.json").is_file() and any(p for pattern in WEIGHT_PATTERNS for p in path.glob(pattern))


def check_disk(ctx: Context) -> Check:
    run, host = ctx.run, ctx.host
    ck = ctx.plan["checkpoints"]
    one = ck["bytes_per_checkpoint"]
    saves = ck["save_steps"]
    keep = ck["keep_last"]
    kept = min(len(saves), int(keep)) if keep else len(saves)
    needs: dict[str, list[tuple[str, float]]] = {}  # path key -> [(what, bytes)]
    if one and saves:
        existing, existing_n = _existing_checkpoint_bytes(run.ckpt_dir)
        ckpt_need = max(0.0, (kept + 1) * one - existing)
        label = f"{kept} kept + 1 in flight x {human_bytes(one)}"
        if existing_n:
            label += f", {existing_n} already on disk"
        needs.setdefault(str(run.ckpt_dir), []).append((f"checkpoints ({label})", ckpt_need))
    from rlrecipes.plan import architecture

    arch = architecture(run)
    if not _model_present(run.model_path) and arch is not None:
        from rlrecipes.models import param_count

        needs.setdefault(str(run.model_path), []).append(("base model (bf16 safetensors)", param_count(arch) * 2))
    train = Path(str(run.get("data.train_files")))
    if not train.is_file():
        needs.setdefault(str(train), []).append(("dataset", 64 * 1024 * 1024))
    if not needs:
        steps = ctx.plan["schedule"]["total_steps"]
        return Check("disk", PASS, f"no checkpoint will be saved (trainer.save_freq={ck['save_freq']}, {steps} "
                     "training steps) and model and data are present")
    by_fs: dict[Any, tuple[Any, list[tuple[str, float]]]] = {}
    unknown = []
    for path, items in needs.items():
        facts = host.disk_for(path)
        if facts is None:
            unknown.append(path)
            continue
        key = facts.device
        entry = by_fs.setdefault(key, (facts, []))
        entry[1].extend(items)
    if unknown and not by_fs:
        return Check("disk", WARN, f"free space unknown for {', '.join(unknown)}", "")
    worst: Check | None = None
    for facts, items in by_fs.values():
        need = sum(b for _, b in items)
        free = facts.free_bytes
        source = f"{facts.checked} has {human_bytes(free)} free"
        wd = host.watchdog
        if wd and wd.get("quota_bytes") is not None and facts.path == str(run.ckpt_dir):
            room = wd["quota_bytes"] - (wd.get("root_bytes") or 0)
            if room < free:
                free, source = room, f"the watchdog's quota leaves {human_bytes(room)} ({wd['status']})"
        parts = " + ".join(f"{what} {human_bytes(b)}" for what, b in items if b > 0)
        if need > free:
            fix = "free space or mount a bigger volume"
            if one and saves:
                fit = int(free // one) - 1
                fix += (f", or keep fewer checkpoints: trainer.max_actor_ckpt_to_keep={fit}" if fit >= 1 else
                        ", or save less often (trainer.save_freq)")
                fix += "; run the watchdog (rlrecipes watchdog --keep-last K) to prune across restarts"
            check = Check("disk", FAIL, f"needs {human_bytes(need)} ({parts}) but {source}", fix)
        elif need > 0.8 * free:
            check = Check("disk", WARN, f"needs {human_bytes(need)} ({parts}), {source}: under 20% headroom",
                          "free space, or lower trainer.max_actor_ckpt_to_keep")
        else:
            check = Check("disk", PASS, f"needs {human_bytes(need)} ({parts}); {source}")
        order = {PASS: 0, WARN: 1, FAIL: 2}
        if worst is None or order[check.status] > order[worst.status]:
            worst = check
    return worst


def check_shm(ctx: Context) -> Check:
    host, run = ctx.host, ctx.run
    n_gpus = int(run.get("trainer.n_gpus_per_node", run.profile.gpus_per_node))
    size = host.shm_bytes
    fix = "run the container with shm_size: 10g (compose) / --shm-size=10g, or ipc: host"
    if size is None:
        return Check("shm", FAIL if n_gpus > 1 else WARN, f"{host.shm_path} is missing: Ray's object store falls back "
                     "to /tmp" + (" and NCCL cannot use shared memory" if n_gpus > 1 else ""), fix)
    text = human_bytes(size)
    if size < SHM_FAIL_BYTES:
        if n_gpus > 1:
            return Check("shm", FAIL, f"{host.shm_path} is {text} (Docker's default is 64 MB): NCCL between {n_gpus} GPUs "
                         "crashes extending its /dev/shm segments, and Ray's object store falls back to /tmp", fix)
        return Check("shm", WARN, f"{host.shm_path} is {text} (Docker's default is 64 MB): Ray's object store falls "
                     "back to /tmp (slow transfers of every batch)", fix)
    if size < SHM_ADVISED_BYTES:
        return Check("shm", WARN, f"{host.shm_path} is {text}; verl runs with >= 10 GiB", fix)
    return Check("shm", PASS, f"{host.shm_path} is {text}")


def host_ram_need(run: ResolvedRun) -> tuple[float, list[str]]:
    """Rough host RAM a run needs: offloaded state + model loading + worker processes (docs/preflight.md)."""
    from rlrecipes.models import lora_param_count, param_count
    from rlrecipes.plan import architecture

    arch = architecture(run)
    per_node = int(run.get("trainer.n_gpus_per_node", run.profile.gpus_per_node))
    nnodes = int(run.get("trainer.nnodes", run.profile.nnodes))
    share = 1 / max(1, nnodes)  # FSDP shards across nodes: one node holds its share
    parts: list[tuple[str, float]] = []
    if arch is not None:
        params = param_count(arch)
        trainable = lora_param_count(arch, run.lora_rank) if run.lora_rank else params
        verl05 = run.image.verl.startswith("0.5.")
        c_fsdp = "critic.model.fsdp_config" if verl05 else "critic.fsdp"
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
    if _engine(run) in ("vllm", "sglang"):
        parts.append((f"{per_node} rollout server(s)", per_node * ENGINE_RAM_BYTES))
    parts.append(("Ray head, driver, dataloader", 4 * GIB))
    return sum(b for _, b in parts), [f"{what} {human_bytes(b)}" for what, b in parts]


def check_host_ram(ctx: Context) -> Check:
    host = ctx.host
    need, parts = host_ram_need(ctx.run)
    if host.ram_total_bytes is None:
        return Check("host-ram", WARN, f"host RAM unknown; the run needs ~{human_bytes(need)}", "")
    detail = f"~{human_bytes(need)} ({', '.join(parts)})"
    if need > host.ram_total_bytes:
        return Check("host-ram", FAIL, f"needs {detail} but the host has {human_bytes(host.ram_total_bytes)}",
                     "turn offloading off where GPU memory allows, use fewer GPUs per node, or a bigger host")
    available = host.ram_available_bytes or host.ram_total_bytes
    if need > available:
        return Check("host-ram", WARN, f"needs {detail}; {human_bytes(available)} of {human_bytes(host.ram_total_bytes)} is "
                     "available now", "stop other processes (or the container's memory limit is too low)")
    return Check("host-ram", PASS, f"needs {detail}; {human_bytes(available)} available")


def check_ulimits(ctx: Context) -> Check:
    host, run = ctx.host, ctx.run
    n_gpus = int(run.get("trainer.n_gpus_per_node", run.profile.gpus_per_node))
    nofile = host.nofile_soft
    if nofile is not None and nofile < NOFILE_MIN:
        return Check("ulimits", FAIL, f"open files limit is {nofile}: Ray workers fail with 'Too many open files'",
                     "ulimit -n 65536 (compose: ulimits: nofile: 65536)")
    problems = []
    if nofile is not None and nofile < NOFILE_ADVISED:
        problems.append(f"open files limit {nofile} < {NOFILE_ADVISED} (Ray's advice)")
    if n_gpus > 1 and host.memlock_soft is not None:
        problems.append(f"memlock limit {human_bytes(host.memlock_soft)}: NCCL wants it unlimited to pin buffers")
    if problems:
        return Check("ulimits", WARN, "; ".join(problems), "compose: ulimits: {memlock: -1, nofile: 65536}")
    memlock = "unlimited" if host.memlock_soft is None else human_bytes(host.memlock_soft)
    return Check("ulimits", PASS, f"open files {nofile or 'unlimited'}, memlock {memlock}")


# ------------------------------------------------------------------------------ model & data
WEIGHT_PATTERNS = ("*.safetensors", "*.bin")


def _model_problem(path: Path) -> str:
    if not path.exists():
        return f"{path} does not exist"
    if not path.is_dir():
        return f"{path} is not a directory"
    if not os.access(path, os.R_OK | os.X_OK):
        return f"{path} is not readable"
    config = path / "config.json"
    if not config.is_file():
        return f"{path} has no config.json"
    try:
        json.loads(config.read_text())
    except (OSError, ValueError) as exc:
        return f"{config} is unreadable: {exc}"
    weights = [p for pattern in WEIGHT_PATTERNS for p in path.glob(pattern)]
    if not weights:
        return f"{path} has no weights (*.safetensors or *.bin)"
    for index in path.glob("*.index.json"):
        try:
            files = set(json.loads(index.read_text())["weight_map"].values())
        except (OSError, ValueError, KeyError) as exc:
            return f"{index} is unreadable: {exc}"
        missing = sorted(f for f in files if not (path / f).is_file())
        if missing:
            return f"{path} is missing shards named by {index.name}: {', '.join(missing[:3])}"
    for weight in weights:
        if not os.access(weight, os.R_OK):
            return f"{weight} is not readable"
    if not ((path / "tokenizer.json").is_file() or (path / "vocab.json").is_file()):
        return f"{path} has no tokenizer (tokenizer.json or vocab.json)"
    return ""


def check_model(ctx: Context) -> Check:
    run = ctx.run
    paths = [run.model_path]
    critic = run.get("critic.model.path") if run.use_critic else None
    if critic and Path(str(critic)) != run.model_path:
        paths.append(Path(str(critic)))
    for path in paths:
        problem = _model_problem(path)
        if problem:
            return Check("model", FAIL, problem,
                         f"rlrecipes model {run.name} --models-dir {run.paths['MODELS_DIR']} (make model "
                         f"RECIPE={run.name}); or set MODELS_DIR to where it is")
    return Check("model", PASS, f"{', '.join(map(str, paths))}: config, weights and tokenizer readable")


def chat_template(model_dir: Path) -> str | None:
    """The tokenizer's chat template as transformers would find it (tokenizer_config.json or the
    chat_template.jinja / chat_template.json files newer releases write)."""
    jinja = model_dir / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    for name, key in (("chat_template.json", "chat_template"), ("tokenizer_config.json", "chat_template")):
        path = model_dir / name
        if path.is_file():
            try:
                value = json.loads(path.read_text(encoding="utf-8")).get(key)
            except (OSError, ValueError):
                continue
            if isinstance(value, list):  # named templates: transformers uses "default"
                value = next((t.get("template") for t in value if t.get("name") == "default"), None)
            if value:
                return str(value)
    return None


def check_chat_template(ctx: Context) -> Check:
    model = ctx.run.model_path
    if not model.is_dir():
        return Check("chat-template", WARN, "not checked: the model directory is missing", "see the model check")
    template = chat_template(model)
    if template is None:
        return Check("chat-template", FAIL, f"the tokenizer in {model} has no chat template: verl applies it to every "
                     "prompt (apply_chat_template) and fails", "use an -Instruct model, or add chat_template to "
                     "tokenizer_config.json")
    try:
        import jinja2.sandbox

        jinja2.sandbox.ImmutableSandboxedEnvironment(extensions=["jinja2.ext.loopcontrols"]).from_string(template)
    except Exception as exc:  # jinja2.TemplateSyntaxError
        return Check("chat-template", FAIL, f"the chat template in {model} does not compile: {exc}",
                     "fix chat_template in tokenizer_config.json")
    return Check("chat-template", PASS, f"chat template present ({len(template)} chars)")


DATA_COLUMNS = ("data_source", "prompt", "reward_model")


def _data_problem(path: Path) -> tuple[str, int]:
    if not path.is_file():
        return f"{path} does not exist", 0
    if not os.access(path, os.R_OK):
        return f"{path} is not readable", 0
    import pyarrow.parquet as pq

    try:
        meta = pq.read_metadata(path)
    except Exception as exc:  # pyarrow.ArrowInvalid on a truncated or foreign file
        return f"{path} is not a readable parquet file: {exc}", 0
    names = set(meta.schema.to_arrow_schema().names)
    missing = [c for c in DATA_COLUMNS if c not in names]
    if missing:
        return f"{path} lacks verl's columns {', '.join(missing)} (has {', '.join(sorted(names))})", 0
    if meta.num_rows == 0:
        return f"{path} has no rows", 0
    return "", meta.num_rows


def check_data(ctx: Context) -> Check:
    run = ctx.run
    rows = {}
    for key in ("data.train_files", "data.val_files"):
        value = run.get(key)
        for item in value if isinstance(value, list) else [value]:
            problem, n = _data_problem(Path(str(item)))
            if problem:
                return Check("data", FAIL, problem, f"rlrecipes data {run.recipe.dataset.name} --out {run.data_dir} "
                             "(make data); or set DATA_DIR to where it is")
            rows[str(item)] = n
    return Check("data", PASS, "; ".join(f"{Path(p).name}: {n} rows" for p, n in rows.items()))


class ChatTokenizer:
    """Counts prompt tokens like `AutoTokenizer.apply_chat_template(..., add_generation_prompt=True)`
    does, with the `tokenizers` library and jinja2 directly: importing transformers costs 8-20 s on a
    small machine, more than the whole preflight may take. Same jinja environment as transformers
    (trim_blocks, lstrip_blocks, loopcontrols, raise_exception, tojson); tests compare it with
    transformers on a real tokenizer."""

    def __init__(self, model_dir: Path):
        import jinja2
        import jinja2.sandbox
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        config = {}
        cfg_path = model_dir / "tokenizer_config.json"
        if cfg_path.is_file():
            config = json.loads(cfg_path.read_text(encoding="utf-8"))

        def raise_exception(message):
            raise jinja2.exceptions.TemplateError(message)

        def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
            return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

        env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                           extensions=["jinja2.ext.loopcontrols"])
        env.filters["tojson"] = tojson
        env.globals["raise_exception"] = raise_exception
        self.template = env.from_string(chat_template(model_dir) or "")
        self.special = {}
        for key in ("bos_token", "eos_token", "pad_token", "unk_token"):
            value = config.get(key)
            if isinstance(value, dict):
                value = value.get("content")
            self.special[key] = value

    def apply_chat_template(self, conversations: list, add_generation_prompt: bool = True,
                            tokenize: bool = True) -> list:
        texts = [self.template.render(messages=list(conv), tools=None, documents=None,
                                      add_generation_prompt=add_generation_prompt, **self.special)
                 for conv in conversations]
        if not tokenize:
            return texts
        return [enc.ids for enc in self.tokenizer.encode_batch(texts, add_special_tokens=False)]


def _prompts(path: Path, column: str) -> list[list[dict]]:
    import pyarrow.parquet as pq

    rows = pq.read_table(path, columns=[column]).column(column).to_pylist()
    return [[{"role": m["role"], "content": m["content"]} for m in row] for row in rows]


def prompt_token_counts(tok: ChatTokenizer, prompts: list, limit: int) -> tuple[int, int, int]:
    """(prompts over `limit` tokens, total prompts, longest count seen). Byte-level BPE never makes more
    tokens than the text has UTF-8 bytes, so only prompts longer than `limit` bytes are tokenised."""
    texts = tok.apply_chat_template(prompts, add_generation_prompt=True, tokenize=False)
    sizes = [len(t.encode("utf-8")) for t in texts]
    candidates = [t for t, size in zip(texts, sizes) if size > limit]
    counts = [len(e.ids) for e in tok.tokenizer.encode_batch(candidates, add_special_tokens=False)] if candidates else []
    over = sum(1 for n in counts if n > limit)
    return over, len(texts), max(counts, default=0)


def check_prompt_length(ctx: Context) -> Check:
    run = ctx.run
    model = run.model_path
    if not (model / "tokenizer.json").is_file() or chat_template(model) is None:
        return Check("prompt-length", WARN, "not checked: no tokenizer.json with a chat template in the model "
                     "directory", "see the model and chat-template checks")
    limit = int(run.get("data.max_prompt_length", 512))
    column = str(run.get("data.prompt_key", "prompt"))
    tok = ChatTokenizer(model)
    results = []
    for key in ("data.train_files", "data.val_files"):
        value = run.get(key)
        for item in value if isinstance(value, list) else [value]:
            path = Path(str(item))
            if not path.is_file():
                return Check("prompt-length", WARN, f"not checked: {path} is missing", "see the data check")
            try:
                prompts = _prompts(path, column)
            except Exception as exc:  # wrong column type, unreadable file
                return Check("prompt-length", WARN, f"not checked: cannot read prompts from {path}: {exc}", "")
            results.append((path, *prompt_token_counts(tok, prompts, limit)))
    longest = max((m for *_, m in results), default=0)
    bad = [(p, k, n, m) for p, k, n, m in results if k]
    if not bad:
        shown = f"longest prompt {longest} tokens" if longest else "every prompt is shorter in bytes than the limit"
        return Check("prompt-length", PASS, f"{shown} <= data.max_prompt_length={limit} "
                     f"({sum(n for _, _, n, _ in results)} prompts)")
    detail = "; ".join(f"{p.name}: {k} of {n} prompts > {limit} tokens (longest {m})" for p, k, n, m in bad)
    fix = f"data.max_prompt_length={longest} (and re-check memory), or shorten the prompt template"
    if run.get("data.filter_overlong_prompts", False):
        return Check("prompt-length", WARN, f"{detail}; data.filter_overlong_prompts drops them", fix)
    if str(run.get("data.truncation", "error")) == "error":
        return Check("prompt-length", FAIL, f"{detail}; with data.truncation=error verl raises at the first one",
                     fix + ", or data.filter_overlong_prompts=True")
    return Check("prompt-length", WARN, f"{detail}; data.truncation={run.get('data.truncation')} cuts them", fix)


# ---------------------------------------------------------------------------------- tracking
def wandb_selected(run: ResolvedRun) -> bool:
    loggers = run.get("trainer.logger", [])
    if isinstance(loggers, str):
        loggers = [loggers]
    return any(str(x) == "wandb" for x in loggers or [])


def check_tracking(ctx: Context) -> Check:
    run, env = ctx.run, ctx.host.env
    if not wandb_selected(run):
        hint = " (wandb is added automatically when WANDB_API_KEY is set)" if run.recipe.wandb == "auto" else ""
        return Check("tracking", PASS, f"loggers {run.get('trainer.logger')}: no wandb{hint}")
    mode = env.get("WANDB_MODE", "").lower()
    if mode in ("offline", "disabled", "dryrun") or env.get("WANDB_DISABLED", "").lower() in ("true", "1"):
        return Check("tracking", PASS, f"wandb in WANDB_MODE={mode or 'disabled'}: no login needed")
    if env.get("WANDB_API_KEY"):
        return Check("tracking", PASS, "wandb with WANDB_API_KEY")
    if ctx.host.wandb_netrc:
        return Check("tracking", PASS, "wandb with the ~/.netrc login (wandb login)")
    return Check("tracking", WARN, "wandb is selected but there is no WANDB_API_KEY and no `wandb login`: "
                 "WANDB_MODE=offline will be used (runs land in wandb/offline-run-*)",
                 "export WANDB_API_KEY=... for live logging, or upload later with `wandb sync wandb/offline-run-*`")


def offline_env(ctx: Context, checks: list[Check]) -> dict[str, str]:
    """Environment the launch must get so that it never crashes on tracking."""
    if any(c.name == "tracking" and c.status == WARN for c in checks):
        return {"WANDB_MODE": "offline"}
    return {}


def check_tracker(ctx: Context) -> Check:
    from rlrecipes.watchdog import resume_check

    run = ctx.run
    mode = str(run.get("trainer.resume_mode", "auto"))
    root = run.ckpt_dir
    if mode == "disable":
        return Check("tracker", PASS, "trainer.resume_mode=disable: the run starts at step 0")
    if mode == "resume_path":
        path = run.get("trainer.resume_from_path")
        if not path or not Path(str(path)).is_dir():
            return Check("tracker", FAIL, f"trainer.resume_mode=resume_path but trainer.resume_from_path={path!r} is "
                         "not a directory", "point it at a global_step_N directory")
        return Check("tracker", PASS, f"resumes from {path}")
    findings = resume_check(root, repair=False, grace_s=0.0)
    errors = [f for f in findings if f.severity == "error"]
    warns = [f for f in findings if f.severity == "warn"]
    fix = f"rlrecipes resume-check --root {root}"
    if errors:
        return Check("tracker", FAIL, "; ".join(f.message for f in errors),
                     f"restore the checkpoint, or remove {root}/latest_checkpointed_iteration.txt to start over "
                     "knowingly")
    if warns:
        return Check("tracker", FAIL, "; ".join(f.message for f in warns),
                     f"{fix} (rewrites the tracker to the newest complete checkpoint)")
    info = [f.message for f in findings if f.experiment == str(Path(os.path.realpath(root)))] or \
        [f.message for f in findings]
    return Check("tracker", PASS, info[0] if info else "no checkpoint yet")


# ------------------------------------------------------------------------------------- runner
CHECKS: list[tuple[str, Callable[[Context], Check]]] = [
    ("gpu-inventory", check_gpu_inventory),
    ("gpu-count", check_gpu_count),
    ("tensor-parallel", check_tensor_parallel),
    ("driver", check_driver),
    ("image-arch", check_image_arch),
    ("compute-dtype", check_compute_dtype),
    ("attention", check_attention),
    ("rollout-engine", check_rollout_engine),
    ("triton", check_triton),
    ("gpu-memory", check_gpu_memory),
    ("disk", check_disk),
    ("shm", check_shm),
    ("host-ram", check_host_ram),
    ("ulimits", check_ulimits),
    ("model", check_model),
    ("chat-template", check_chat_template),
    ("data", check_data),
    ("prompt-length", check_prompt_length),
    ("tracking", check_tracking),
    ("tracker", check_tracker),
]
CHECK_NAMES = [name for name, _ in CHECKS]


def run_checks(run: ResolvedRun, inventory: Inventory, host: HostFacts, only: list[str] | None = None,
               context: Context | None = None) -> list[Check]:
    ctx = context or Context(run, inventory, host)
    out = []
    for name, func in CHECKS:
        if only and name not in only:
            continue
        try:
            out.append(func(ctx))
        except Exception as exc:  # a bug in one check must not hide the others
            out.append(Check(name, WARN, f"check could not run: {type(exc).__name__}: {exc}",
                             "please report it with `rlrecipes env`"))
    return out

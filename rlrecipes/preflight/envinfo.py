"""`rlrecipes env`: the environment block a bug report needs (like `trl env`): platform, driver, CUDA,
GPUs, and the versions of the packages a verl run depends on. Reads package metadata instead of
importing the packages, so it is instant and works when torch itself is broken."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata

PACKAGES = ("rlrecipes", "torch", "verl", "vllm", "sglang", "transformers", "tokenizers", "peft", "accelerate",
            "ray", "flash-attn", "flash_attn", "triton", "datasets", "hydra-core", "omegaconf", "tensordict",
            "lm-eval", "wandb", "nvidia-ml-py", "numpy", "pyarrow")
# Set by the images (docker/*.Dockerfile) and by nvidia/cuda base images.
ENV_VARS = ("RLRECIPES_IMAGE", "RLRECIPES_HOME", "CUDA_VERSION", "NVIDIA_DRIVER_CAPABILITIES", "CUDA_VISIBLE_DEVICES",
            "NVIDIA_VISIBLE_DEVICES", "MODELS_DIR", "DATA_DIR", "CKPT_DIR", "LOG_DIR", "CACHE_DIR", "HF_HOME",
            "WANDB_MODE", "RAY_ADDRESS", "VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            if name != "flash_attn":
                out.setdefault(name, None)
    if out.get("flash_attn") and not out.get("flash-attn"):
        out["flash-attn"] = out["flash_attn"]
    out.pop("flash_attn", None)
    return out


def torch_cuda(torch_version: str | None) -> str | None:
    """The CUDA runtime a torch wheel was built for, from its local version: 2.6.0+cu118 -> 11.8."""
    if not torch_version or "+cu" not in torch_version:
        return None
    digits = torch_version.split("+cu", 1)[1]
    return f"{digits[:-1]}.{digits[-1]}" if digits.isdigit() and len(digits) >= 3 else None


def collect(inventory=None) -> dict:
    from rlrecipes import __version__
    from rlrecipes.preflight.inventory import detect_inventory
    from rlrecipes.ui import git_commit

    inv = inventory if inventory is not None else detect_inventory()
    versions = package_versions()
    return {
        "rlrecipes": __version__,
        "git_commit": git_commit(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "driver": inv.driver_version,
        "driver_max_cuda": inv.cuda_driver_version,
        "torch_cuda_build": torch_cuda(versions.get("torch")),
        "image_cuda": os.environ.get("CUDA_VERSION"),
        "gpus": [f"{g.index}: {g.name}, {g.memory_mib} MiB, sm_{(g.compute_capability or '?').replace('.', '')}"
                 for g in inv.gpus] or [f"none ({inv.error})"],
        "gpu_source": inv.source,
        "packages": versions,
        "env": {k: os.environ[k] for k in ENV_VARS if k in os.environ},
    }


# `--json` keys are identifiers (jq .driver_max_cuda); the block a person reads spells them out.
LABELS = {"git_commit": "git commit", "driver_max_cuda": "driver max CUDA", "torch_cuda_build": "torch CUDA build",
          "image_cuda": "image CUDA (CUDA_VERSION)", "gpu_source": "gpu source"}


def format_block(info: dict) -> str:
    lines = ["Copy-paste the following information when you file an issue:", ""]
    for key, value in info.items():
        key = LABELS.get(key, key)
        if isinstance(value, dict):
            shown = ", ".join(f"{k} {v}" for k, v in value.items() if v is not None) or "-"
            lines.append(f"- {key}: {shown}")
        elif isinstance(value, list):
            lines.append(f"- {key}:")
            lines.extend(f"    - {item}" for item in value)
        else:
            lines.append(f"- {key}: {value if value is not None else '-'}")
    missing = [k for k, v in info.get("packages", {}).items() if v is None]
    if missing:
        lines.append(f"- not installed: {', '.join(missing)}")
    return "\n".join(lines)

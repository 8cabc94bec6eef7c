"""The container images a profile can run on, with the versions that decide binary compatibility.

These defaults must agree with the ARG defaults in docker/<name>.Dockerfile and the lock files
(tests/recipe/test_images.py checks it).

Stdlib only, and runnable as a file: the Dockerfiles copy it in before the project and run
`python images.py check-torch <image>` right after installing torch, so a torch build without kernels for the
image's GPUs fails the build, not the first training step.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rlrecipes.verl.specs import VerlSpec


@dataclass(frozen=True)
class Image:
    name: str
    dockerfile: str
    base: str
    cuda: str
    torch: str
    python: str
    verl: str
    rollout_engines: tuple[str, ...]
    min_driver: str  # oldest driver branch that runs this CUDA runtime
    # The oldest compute capability the image is built to run on: its torch must have kernels for it.
    min_capability: str
    # The oldest compute capability its torch build has any kernels for (preflight's image-arch check):
    # cu128 builds dropped sm_50-sm_61 (a100: from 7.0); cu118 covers sm_50+.
    kernels_min_capability: str
    # flash-attn installed: kept out of the P40 image on purpose (verl would route its cross-entropy
    # through flash-attn's Triton kernel, and Triton needs sm_70)
    flash_attn: bool
    notes: str = ""

    @property
    def spec(self) -> VerlSpec:
        """What this image's verl accepts and how its config is laid out (KeyError when
        rlrecipes/verl/specs.py has no spec for it). Imported here: this file also runs alone."""
        from rlrecipes.verl.specs import spec_for

        return spec_for(self.verl)

    @property
    def tag(self) -> str:
        cu = "cu" + "".join(self.cuda.split(".")[:2])
        return f"rlrecipes/{self.name}:verl{self.verl}-{cu}-torch{self.torch}-py{self.python}"


# RunPod's PyTorch base (torch 2.8.0 cu128, Python 3.12, Ubuntu 24.04): its /start.sh starts sshd from PUBLIC_KEY
# and Jupyter with JUPYTER_PASSWORD. `make build-runpod` builds the A100 image on it, tagged <a100 tag>-runpod.
RUNPOD_BASE = "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404"
RUNPOD_SUFFIX = "-runpod"
# The images a pod can run (RunPod offers no Pascal GPUs), each on the RunPod base of its CUDA: the Hopper image
# on RunPod's CUDA 13.0 PyTorch base (same /start.sh; Ubuntu 24.04, Python 3.12; hosts with drivers >= 580).
RUNPOD_BASES = {"a100": RUNPOD_BASE, "hopper": "runpod/pytorch:1.0.2-cu1300-torch280-ubuntu2404"}

IMAGES: dict[str, Image] = {
    "a100": Image(
        name="a100",
        dockerfile="docker/a100.Dockerfile",
        base="nvidia/cuda:12.8.1-cudnn-devel-ubuntu22.04",
        cuda="12.8.1",
        torch="2.8.0",
        python="3.12",
        verl="0.8.0",
        rollout_engines=("vllm",),
        min_driver="570",
        min_capability="8.0",
        kernels_min_capability="7.0",
        flash_attn=True,
        notes="BF16, FlashAttention-2, vLLM 0.11.0 async rollout",
    ),
    "hopper": Image(
        name="hopper",
        dockerfile="docker/hopper.Dockerfile",
        base="nvidia/cuda:13.0.2-cudnn-devel-ubuntu24.04",
        cuda="13.0.2",
        torch="2.11.0",
        python="3.12",
        verl="0.9.1",
        rollout_engines=("vllm",),
        min_driver="580",
        # torch 2.11.0+cu130 and vLLM 0.24.0 also run on sm_80, but the image is built and proven for Hopper
        min_capability="9.0",
        kernels_min_capability="7.5",
        flash_attn=False,
        notes="BF16, SDPA attention, vLLM 0.24.0 async rollout, transformers 5.9.0; Hopper (sm_90) and newer",
    ),
    "p40": Image(
        name="p40",
        dockerfile="docker/p40.Dockerfile",
        base="nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04",
        cuda="11.8.0",
        torch="2.6.0",
        python="3.10",
        verl="0.5.0",
        rollout_engines=("hf",),
        min_driver="520",
        min_capability="6.1",
        kernels_min_capability="5.0",
        flash_attn=False,
        notes="FP32, eager attention, HF generate rollout, verl patched for sm_61",
    ),
}


def _capability(text: str) -> tuple[int, int]:
    major, _, minor = text.strip().partition(".")
    return int(major), int(minor or 0)


def torch_runs_on(arch_flags: str | Iterable[str], capability: str) -> bool:
    """Whether a CUDA build of torch, compiled for `arch_flags` (`torch._C._cuda_getArchFlags()`, e.g.
    "sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"), has code a GPU of compute capability `capability`
    (e.g. "6.1") can run.

    CUDA's rules: a cubin for sm_XY runs on devices of the same major version X and minor >= Y (sm_60 code runs
    on a 6.1 Tesla P40; no cubin runs across major versions); PTX for compute_XY is compiled by the driver for
    any device of capability >= X.Y. PyTorch's cu118/cu124/cu126 wheels ship sm_60, not sm_61 -- so asking for
    'sm_61' by name rejects every one of them.
    """
    flags = arch_flags.split() if isinstance(arch_flags, str) else list(arch_flags)
    major, minor = _capability(capability)
    for flag in flags:
        kind, _, digits = flag.partition("_")
        digits = digits.rstrip("af")  # sm_90a / sm_100f: arch-specific variants of the same capability
        if len(digits) < 2 or not digits.isdigit():
            continue
        f_major, f_minor = int(digits[:-1]), int(digits[-1])
        if kind == "sm" and f_major == major and f_minor <= minor:
            return True
        if kind == "compute" and (f_major, f_minor) <= (major, minor):
            return True
    return False


def check_torch(image: str) -> int:
    """The build-time check: the installed torch can run on the image's oldest GPU. Exit code 0 or 1."""
    import torch  # noqa: PLC0415 -- only inside an image build, after torch is installed

    wanted = IMAGES[image].min_capability
    flags = torch._C._cuda_getArchFlags()
    if torch_runs_on(flags, wanted):
        print(f"torch {torch.__version__} (CUDA {torch.version.cuda}) runs on compute capability {wanted}: {flags}")
        return 0
    print(f"error: torch {torch.__version__} (CUDA {torch.version.cuda}) has no kernels for compute capability "
          f"{wanted} (needs sm_{wanted.split('.')[0]}x cubins up to sm_{wanted.replace('.', '')} or older PTX); "
          f"it was built for: {flags}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "check-torch" or sys.argv[2] not in IMAGES:
        sys.exit(f"usage: python images.py check-torch {{{','.join(IMAGES)}}}")
    sys.exit(check_torch(sys.argv[2]))

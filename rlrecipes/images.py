"""The container images a profile can run on, with the versions that decide binary compatibility.

These defaults must agree with the ARG defaults in docker/<name>.Dockerfile and the lock files
(tests/test_images.py checks it).
"""

from __future__ import annotations

from dataclasses import dataclass


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
    notes: str = ""

    @property
    def tag(self) -> str:
        cu = "cu" + "".join(self.cuda.split(".")[:2])
        return f"rlrecipes/{self.name}:verl{self.verl}-{cu}-torch{self.torch}-py{self.python}"


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
        notes="BF16, FlashAttention-2, vLLM 0.11.0 async rollout",
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
        notes="FP32, eager attention, HF generate rollout, verl patched for sm_61",
    ),
}

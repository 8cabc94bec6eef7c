"""The versions in rlrecipes/recipe/images.py, the Dockerfiles' ARG defaults, the lock files and compose.yaml
agree, and the stand-in base images cover every FROM (so CI builds what users build)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.docker import dockerfile_bases, standin_tags

from rlrecipes.recipe.images import IMAGES, torch_runs_on

REPO = Path(__file__).resolve().parents[2]


def arg_defaults(dockerfile: str) -> dict[str, str]:
    """ARG defaults; an ARG repeated after FROM must repeat the same default (else the two scopes differ)."""
    seen: dict[str, str] = {}
    for name, value in re.findall(r"^ARG (\w+)=(\S+)", (REPO / dockerfile).read_text(), flags=re.M):
        assert seen.setdefault(name, value) == value, f"{dockerfile}: ARG {name} has two defaults"
    return seen


def lock_versions(name: str) -> dict[str, str]:
    text = (REPO / "docker" / f"{name}.lock").read_text()
    return {m.group(1).lower(): m.group(2) for m in re.finditer(r"^([A-Za-z0-9._-]+)==(\S+)", text, flags=re.M)}


def lock_python(name: str) -> str:
    text = (REPO / "docker" / "pins" / f"{name}.in").read_text()
    return re.search(r"^# lock:.*--python-version (\S+)", text, flags=re.M).group(1)


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_dockerfile_args_match_image_table(name):
    image = IMAGES[name]
    args = arg_defaults(image.dockerfile)
    assert args["CUDA_VERSION"] == image.cuda
    assert args["PYTHON_VERSION"] == image.python
    assert args["TORCH_VERSION"] == image.torch
    assert args["VERL_VERSION"] == image.verl


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_dockerfile_base_is_the_table_base(name):
    image = IMAGES[name]
    text = (REPO / image.dockerfile).read_text()
    args = arg_defaults(image.dockerfile)
    (base,) = re.findall(r"^FROM (\S+)", text, flags=re.M)
    assert re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base) == image.base


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_lock_matches_image_table(name):
    image = IMAGES[name]
    versions = lock_versions(name)
    assert versions["verl"] == image.verl
    assert lock_python(name) == image.python
    if name == "hopper":
        assert versions["transformers"] == "5.9.0", "verl 0.9.1's vllm extra pins transformers 5.9.0"
    else:
        assert versions["transformers"].startswith("4."), "verl 0.5.0 and vLLM 0.11 need transformers 4.x"


def test_a100_lock_has_the_cuda_12_8_stack():
    versions = lock_versions("a100")
    assert versions["torch"] == IMAGES["a100"].torch
    assert versions["vllm"] == "0.11.0"
    assert versions["nvidia-cuda-runtime-cu12"].startswith("12.8."), "torch 2.8.0 from PyPI is the cu128 build"
    args = arg_defaults(IMAGES["a100"].dockerfile)
    assert args["VLLM_VERSION"] == versions["vllm"]


def test_hopper_lock_has_the_cuda_13_stack():
    versions = lock_versions("hopper")
    args = arg_defaults(IMAGES["hopper"].dockerfile)
    assert versions["torch"] == IMAGES["hopper"].torch == "2.11.0"
    assert versions["vllm"] == args["VLLM_VERSION"] == "0.24.0"
    assert versions["transformers"] == args["TRANSFORMERS_VERSION"]
    # torch 2.11.0 from PyPI is the CUDA 13.0 build: its runtime wheels, not the cu12 ones
    assert versions["cuda-toolkit"].startswith("13.0."), versions["cuda-toolkit"]
    assert versions["nvidia-cuda-runtime"].startswith("13.0."), versions["nvidia-cuda-runtime"]
    assert not [n for n in versions if n.endswith("-cu12")], "CUDA 12 wheels in the CUDA 13 image"
    assert IMAGES["hopper"].cuda.startswith("13.0.") and IMAGES["hopper"].min_driver == "580"
    # verl 0.9.1's V1 trainer imports transfer_queue; its numpy floor is 2
    assert "transferqueue" in versions and versions["numpy"].startswith("2.")
    assert "flash-attn" not in versions, "flash-attn comes only from the optional WITH_FLASH_ATTN step"
    assert args["WITH_FLASH_ATTN"] == "0"


def test_p40_lock_leaves_torch_and_sm70_only_packages_out():
    versions = lock_versions("p40")
    for name in ("torch", "vllm", "flash-attn", "triton", "xformers"):
        assert name not in versions, f"{name} must not be in the P40 lock"
    assert not [n for n in versions if n.startswith("nvidia-") and n != "nvidia-ml-py"], \
        "CUDA 12 runtime wheels in the P40 lock: torch+cu118 brings its own"
    args = arg_defaults(IMAGES["p40"].dockerfile)
    assert args["TORCH_CUDA"] == "cu" + "".join(IMAGES["p40"].cuda.split(".")[:2])
    assert args["TORCH_INDEX_URL"].endswith("/" + args["TORCH_CUDA"])
    assert args["WITH_APEX"] == "0"


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_compose_default_image_is_the_table_tag(name):
    text = (REPO / "compose.yaml").read_text()
    assert f"${{{name.upper()}_IMAGE:-{IMAGES[name].tag}}}" in text


def test_standin_bases_cover_every_dockerfile_base():
    bases = dockerfile_bases()
    assert {image.base for image in IMAGES.values()} <= bases
    assert bases <= standin_tags(), f"no stand-in for {bases - standin_tags()}: CI could not build it"


@pytest.mark.parametrize("dockerfile", sorted(p.name for p in (REPO / "docker").glob("*.Dockerfile")))
def test_dockerfile_has_no_syntax_line_or_heredoc(dockerfile):
    text = (REPO / "docker" / dockerfile).read_text()
    assert not text.startswith("# syntax="), "the frontend image cannot be pulled in CI"
    assert not re.search(r"<<-?\s*['\"]?[A-Z]+", text), "heredocs need a newer frontend than the daemon's own"


# Real `torch._C._cuda_getArchFlags()` lists of PyTorch's wheels (pytorch/builder's TORCH_CUDA_ARCH_LIST per CUDA
# version; the moi90/pytorch_compute_capabilities table lists the same for 2.6.0 cu118/cu124 and 2.7.0 cu128).
TORCH_ARCHS = {
    "2.6.0+cu118": "sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90",
    "2.6.0+cu124": "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90",
    "2.7.0+cu128": "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120",
    # read from PyPI's torch 2.8.0 wheel (the A100 image's) by `make test-images-full` (docs/images.md)
    "2.8.0+cu128": "sm_70 sm_75 sm_80 sm_86 sm_90 sm_100 sm_120",
    "2.5.1+cu124": "sm_50 sm_60 sm_61 sm_70 sm_75 sm_80 sm_86 sm_90 sm_90a",
}


@pytest.mark.parametrize(("build", "capability", "runs"), [
    ("2.6.0+cu118", "6.1", True),    # the P40 image's torch: sm_60 cubins run on sm_61 (the old check said no)
    ("2.6.0+cu124", "6.1", True),    # sm_60
    ("2.7.0+cu128", "6.1", False),   # no sm_6x at all
    ("2.8.0+cu128", "6.1", False),   # the A100 image's torch cannot run on a P40
    ("2.8.0+cu128", "8.0", True),
    ("2.5.1+cu124", "6.1", True),    # sm_61 by name
    ("2.6.0+cu118", "6.0", True),
    ("2.6.0+cu118", "8.0", True),    # A100
    ("2.6.0+cu118", "8.9", True),    # sm_86 runs on 8.9 (same major, newer minor)
    ("2.7.0+cu128", "12.0", True),
    ("2.7.0+cu128", "7.0", False),   # V100: cu128 starts at sm_75
    ("2.6.0+cu124", "10.0", False),  # Blackwell: no sm_10x, no PTX
    ("2.5.1+cu124", "9.0", True),    # sm_90a is an sm_90 variant
])
def test_torch_runs_on_real_arch_lists(build, capability, runs):
    assert torch_runs_on(TORCH_ARCHS[build], capability) is runs


@pytest.mark.parametrize(("flags", "capability", "runs"), [
    ("sm_70 compute_70", "6.1", False),  # PTX only runs on its own capability or newer
    ("sm_50 compute_60", "6.1", True),   # compute_60 PTX is JIT-compiled for 6.1
    ("sm_61", "6.0", False),             # a cubin never runs on an older minor
    ("sm_52", "6.1", False),             # nor across major versions
    ("", "6.1", False),                  # a CPU build lists nothing
])
def test_torch_runs_on_cubin_and_ptx_rules(flags, capability, runs):
    assert torch_runs_on(flags, capability) is runs


@pytest.mark.parametrize(("name", "flags", "code"), [
    ("p40", TORCH_ARCHS["2.6.0+cu118"], 0),
    ("p40", TORCH_ARCHS["2.7.0+cu128"], 1),
    ("a100", TORCH_ARCHS["2.7.0+cu128"], 0),
    ("hopper", TORCH_ARCHS["2.7.0+cu128"], 0),
    ("hopper", "sm_75 sm_80 sm_86", 1),      # a torch without Hopper kernels fails the Hopper image's build
])
def test_dockerfiles_run_the_capability_check(tmp_path, name, flags, code):
    """The build step itself: `python images.py check-torch NAME` as a file, against a torch that reports `flags`."""
    text = (REPO / IMAGES[name].dockerfile).read_text()
    assert f"images.py check-torch {name}" in text and "'sm_61' in" not in text
    fake = tmp_path / "torch"
    (fake / "_C").mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "from types import SimpleNamespace\n__version__ = 'fake'\nversion = SimpleNamespace(cuda='11.8')\n"
        "from . import _C\n")
    (fake / "_C" / "__init__.py").write_text(f"def _cuda_getArchFlags():\n    return {flags!r}\n")
    proc = subprocess.run([sys.executable, str(REPO / "rlrecipes" / "recipe" / "images.py"), "check-torch", name],
                          capture_output=True, text=True, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == code, proc.stderr
    if code:
        assert f"no kernels for compute capability {IMAGES[name].min_capability}" in proc.stderr

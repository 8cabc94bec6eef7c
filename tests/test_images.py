"""The versions in rlrecipes/images.py, the Dockerfiles' ARG defaults, the lock files and compose.yaml
agree, and the stand-in base images cover every FROM (so CI builds what users build)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.docker import dockerfile_bases, standin_tags

from rlrecipes.images import IMAGES

REPO = Path(__file__).resolve().parents[1]


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
    assert versions["transformers"].startswith("4."), "verl 0.5.0 and vLLM 0.11 need transformers 4.x"


def test_a100_lock_has_the_cuda_12_8_stack():
    versions = lock_versions("a100")
    assert versions["torch"] == IMAGES["a100"].torch
    assert versions["vllm"] == "0.11.0"
    assert versions["nvidia-cuda-runtime-cu12"].startswith("12.8."), "torch 2.8.0 from PyPI is the cu128 build"
    args = arg_defaults(IMAGES["a100"].dockerfile)
    assert args["VLLM_VERSION"] == versions["vllm"]


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
    assert {IMAGES["a100"].base, IMAGES["p40"].base} <= bases
    assert bases <= standin_tags(), f"no stand-in for {bases - standin_tags()}: CI could not build it"


@pytest.mark.parametrize("dockerfile", sorted(p.name for p in (REPO / "docker").glob("*.Dockerfile")))
def test_dockerfile_has_no_syntax_line_or_heredoc(dockerfile):
    text = (REPO / "docker" / dockerfile).read_text()
    assert not text.startswith("# syntax="), "the frontend image cannot be pulled in CI"
    assert not re.search(r"<<-?\s*['\"]?[A-Z]+", text), "heredocs need a newer frontend than the daemon's own"

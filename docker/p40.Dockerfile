# P40 (Pascal, sm_61) image: verl 0.5.0 with Hugging Face rollout, FP32, eager attention, on CUDA 11.8,
# Python 3.10, torch 2.6.0+cu118. PyTorch's cu118 wheels carry sm_60 kernels (not sm_61), which run on every
# sm_6x GPU; 2.7.1 is the last cu118 release, and the cu128 builds have no Pascal code at all.
# Build:  make build-p40     (docker build -f docker/p40.Dockerfile -t rlrecipes/p40:<tag> .)
# No vLLM (needs sm_70+), no flash-attn (needs sm_80; importing it would also switch verl to Triton kernels,
# which need sm_70+). verl is patched for sm_61 by scripts/patch_verl.py --image p40 right after it is installed.
# Every version is an ARG with a pinned default that rlrecipes/recipe/images.py repeats (tests/recipe/test_images.py).
# CI builds this file against a stand-in Debian base with SKIP_GPU_WHEELS=1 (docs/images.md).
# scripts/build-image.sh passes BASE_IMAGE=<this>@sha256:... when docker/bases.lock pins it (`make lock`).
ARG BASE_IMAGE=nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04
FROM ${BASE_IMAGE}

ARG CUDA_VERSION=11.8.0
# Ubuntu 22.04's own python3 is 3.10: no PPA needed.
ARG PYTHON_VERSION=3.10
ARG TORCH_VERSION=2.6.0
ARG TORCH_CUDA=cu118
ARG VERL_VERSION=0.5.0
# torch+cu118 exists only on the PyTorch index; the lock (docker/p40.lock) leaves torch out for that reason.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cu118
# 1 = build NVIDIA apex (--cpp_ext --cuda_ext for sm_61). Off by default: verl's FSDP path never imports
# apex (only its Megatron layers do), and the build adds ~20 min.
ARG WITH_APEX=0
ARG APEX_REF=25.09
# 1 = leave out torch and the CUDA wheels, and skip CUDA checks (CI stand-in builds only).
ARG SKIP_GPU_WHEELS=0

LABEL org.opencontainers.image.title="rlrecipes-p40" \
      org.opencontainers.image.description="verl ${VERL_VERSION} PPO recipes for Pascal: HF rollout, FP32, eager; torch ${TORCH_VERSION}+${TORCH_CUDA}, CUDA ${CUDA_VERSION}, Python ${PYTHON_VERSION}" \
      io.rlrecipes.image="p40" \
      io.rlrecipes.cuda="${CUDA_VERSION}" \
      io.rlrecipes.torch="${TORCH_VERSION}+${TORCH_CUDA}" \
      io.rlrecipes.python="${PYTHON_VERSION}" \
      io.rlrecipes.verl="${VERL_VERSION}" \
      io.rlrecipes.apex="${WITH_APEX}" \
      io.rlrecipes.skip-gpu-wheels="${SKIP_GPU_WHEELS}"

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_DEFAULT_TIMEOUT=120

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Versions come from the pinned base image's distribution; pinning each apt package breaks on point releases.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl git procps tini python3 python3-venv python3-dev \
    && rm -rf /var/lib/apt/lists/*

# One virtual environment for everything: no clash with the distribution's Python (PEP 668).
RUN python3 -m venv /opt/venv && /opt/venv/bin/python --version
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:${PATH}

# torch first, exact version from the PyTorch index (it brings its own CUDA 11.8 runtime wheels). The arch check
# (rlrecipes/recipe/images.py: torch_runs_on, unit-tested) reads the compiled kernel list -- torch.cuda.get_arch_list()
# is empty without a GPU, as in every docker build -- and accepts sm_60/sm_61 cubins or compute_6x PTX.
# With docker/p40-torch.lock produced (`make lock`: uv, the PyTorch index as an explicit index), every wheel is
# checked against its hash; a lock that was never produced leaves the version pin alone, and the log says so.
COPY rlrecipes/recipe/images.py /opt/rlrecipes/rlrecipes/recipe/images.py
COPY docker/p40-torch.lock /opt/rlrecipes/docker/p40-torch.lock
RUN --mount=type=cache,target=/root/.cache/pip \
    if [ "${SKIP_GPU_WHEELS}" = 1 ]; then echo "SKIP_GPU_WHEELS=1: no torch"; exit 0; fi; \
    if grep -q "^torch==${TORCH_VERSION}+${TORCH_CUDA} " /opt/rlrecipes/docker/p40-torch.lock; then \
      pip install --no-deps --require-hashes --index-url "${TORCH_INDEX_URL}" --extra-index-url https://pypi.org/simple \
        -r /opt/rlrecipes/docker/p40-torch.lock; \
    else \
      echo "WARNING: docker/p40-torch.lock holds no torch==${TORCH_VERSION}+${TORCH_CUDA}: installing it unhashed"; \
      pip install --index-url "${TORCH_INDEX_URL}" "torch==${TORCH_VERSION}+${TORCH_CUDA}"; \
    fi \
    && python -c "import torch; assert torch.version.cuda == '11.8', torch.version.cuda" \
    && python /opt/rlrecipes/rlrecipes/recipe/images.py check-torch p40

# Dependencies before source: this layer is rebuilt only when the lock changes.
COPY docker/p40.lock /opt/rlrecipes/docker/p40.lock
COPY scripts/install-lock.py /opt/rlrecipes/scripts/install-lock.py
RUN --mount=type=cache,target=/root/.cache/pip \
    if [ "${SKIP_GPU_WHEELS}" = 1 ]; then set -- --skip-gpu; fi; \
    python /opt/rlrecipes/scripts/install-lock.py /opt/rlrecipes/docker/p40.lock "$@"

# verl 0.5.0 hard-codes bf16 autocast, flash-attn imports and a flash-attention critic; the patch fails the
# build (exit 1, edit named) if any anchor does not match verl as installed, and changes nothing then.
COPY scripts/patch_verl.py /opt/rlrecipes/scripts/patch_verl.py
RUN python3 /opt/rlrecipes/scripts/patch_verl.py --image p40 \
    && python3 /opt/rlrecipes/scripts/patch_verl.py --image p40 --check

# Optional NVIDIA apex for sm_61 (see WITH_APEX above): --cpp_ext --cuda_ext through apex's APEX_CPP_EXT /
# APEX_CUDA_EXT switches (setup.py of 25.09), which, unlike --config-settings, also work with Ubuntu 22.04's pip 22.
RUN --mount=type=cache,target=/root/.cache/pip \
    if [ "${WITH_APEX}" != 1 ]; then echo "WITH_APEX=0: no apex"; exit 0; fi; \
    if [ "${SKIP_GPU_WHEELS}" = 1 ]; then echo "WITH_APEX=1 needs torch; SKIP_GPU_WHEELS=1 skips it"; exit 0; fi; \
    git clone --depth 1 --branch "${APEX_REF}" https://github.com/NVIDIA/apex /tmp/apex \
    && TORCH_CUDA_ARCH_LIST=6.1 MAX_JOBS="$(nproc)" APEX_CPP_EXT=1 APEX_CUDA_EXT=1 \
        pip install --no-build-isolation /tmp/apex \
    && rm -rf /tmp/apex

# Fail the build, not the first training step, when the stack does not hold together.
# Under SKIP_GPU_WHEELS=1 verl itself cannot import (it needs torch): check the rest of the stack imports.
RUN if [ "${SKIP_GPU_WHEELS}" = 1 ]; then \
      python -c "import importlib.metadata as m, importlib.util, transformers, ray, hydra, datasets, lm_eval; \
assert m.version('verl') == '${VERL_VERSION}', m.version('verl'); \
assert importlib.util.find_spec('flash_attn') is None, 'flash-attn must stay out of the P40 image'; \
print('verl', m.version('verl'), 'transformers', transformers.__version__)"; \
      exit; \
    fi; \
    python -c "import torch, verl, transformers; \
assert torch.__version__ == '${TORCH_VERSION}+${TORCH_CUDA}', torch.__version__; \
assert verl.__version__ == '${VERL_VERSION}', verl.__version__; \
assert transformers.__version__.startswith('4.'), transformers.__version__; \
import importlib.util; assert importlib.util.find_spec('flash_attn') is None, 'flash-attn must stay out of the P40 image'; \
print('torch', torch.__version__, 'verl', verl.__version__, 'transformers', transformers.__version__)"

# The project itself last: editing a recipe rebuilds only these layers.
# README.m[d]: setuptools reads it for the package metadata; the glob keeps a checkout without it buildable.
COPY pyproject.toml README.m[d] /opt/rlrecipes/
COPY rlrecipes /opt/rlrecipes/rlrecipes
COPY recipes /opt/rlrecipes/recipes
COPY scripts /opt/rlrecipes/scripts
RUN --mount=type=cache,target=/root/.cache/pip \
    pip install --no-deps -e /opt/rlrecipes \
    && rlrecipes --version

# Everything a run reads or writes lives under /workspace (RunPod mounts its volume there; compose mounts
# named volumes). Root stays the user: RunPod's /start.sh (sshd) and fresh named volumes need it.
ENV RLRECIPES_HOME=/opt/rlrecipes \
    RLRECIPES_IN_IMAGE=1 \
    RLRECIPES_IMAGE=p40 \
    MODELS_DIR=/workspace/models \
    DATA_DIR=/workspace/data \
    CKPT_DIR=/workspace/checkpoints \
    LOG_DIR=/workspace/logs \
    HF_HOME=/workspace/hf-cache \
    RAY_DEDUP_LOGS=0
WORKDIR /workspace

ENTRYPOINT ["/usr/bin/tini", "--", "/opt/rlrecipes/scripts/entrypoint.sh"]
CMD ["shell"]

# A100 / H100 image: verl 0.8.0 + vLLM 0.11.0 + FlashAttention-2 on CUDA 12.8, Python 3.12, torch 2.8.0.
# Build:  make build-a100     (docker build -f docker/a100.Dockerfile -t rlrecipes/a100:<tag> .)
# Every version below is an ARG with a pinned default; rlrecipes/recipe/images.py holds the same numbers and
# tests/recipe/test_images.py checks they agree. Python packages come from docker/a100.lock (hashes, no resolver).
# CI builds this file against a stand-in Debian base with SKIP_GPU_WHEELS=1 PYTHON_SOURCE=base (docs/images.md).
# RunPod variant (`make build-runpod`): BASE_IMAGE=runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404 PYTHON_SOURCE=base
# -- RunPod's own /start.sh (SSH from PUBLIC_KEY, Jupyter with JUPYTER_PASSWORD) is then in the image, and the
# entry point starts it on a pod. Its Ubuntu 24.04 python3 is 3.12; its own torch stays outside our venv.
ARG BASE_IMAGE=nvidia/cuda:12.8.1-cudnn-devel-ubuntu22.04
FROM ${BASE_IMAGE}

ARG BASE_IMAGE=nvidia/cuda:12.8.1-cudnn-devel-ubuntu22.04

ARG CUDA_VERSION=12.8.1
ARG PYTHON_VERSION=3.12
ARG TORCH_VERSION=2.8.0
ARG VLLM_VERSION=0.11.0
ARG VERL_VERSION=0.8.0
ARG FLASH_ATTN_VERSION=2.8.3
# deadsnakes: Python from the deadsnakes PPA (Ubuntu 22.04 ships 3.10). base: the base image's python3
# (CI's stand-in base is Debian without the PPA).
ARG PYTHON_SOURCE=deadsnakes
# 1 = leave out torch, vLLM, flash-attn, Triton and the CUDA runtime wheels (CI stand-in builds only).
ARG SKIP_GPU_WHEELS=0

LABEL org.opencontainers.image.title="rlrecipes-a100" \
      org.opencontainers.image.description="verl ${VERL_VERSION} GRPO/PPO recipes: vLLM ${VLLM_VERSION}, FlashAttention ${FLASH_ATTN_VERSION}, torch ${TORCH_VERSION}, CUDA ${CUDA_VERSION}, Python ${PYTHON_VERSION}" \
      io.rlrecipes.image="a100" \
      io.rlrecipes.base="${BASE_IMAGE}" \
      io.rlrecipes.cuda="${CUDA_VERSION}" \
      io.rlrecipes.torch="${TORCH_VERSION}" \
      io.rlrecipes.python="${PYTHON_VERSION}" \
      io.rlrecipes.verl="${VERL_VERSION}" \
      io.rlrecipes.vllm="${VLLM_VERSION}" \
      io.rlrecipes.flash-attn="${FLASH_ATTN_VERSION}" \
      io.rlrecipes.skip-gpu-wheels="${SKIP_GPU_WHEELS}"

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_DEFAULT_TIMEOUT=120

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# System packages. Versions come from the pinned base image's distribution; pinning each apt package would
# break on every point release of the base.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl git procps tini \
    && if [ "${PYTHON_SOURCE}" = deadsnakes ]; then \
         apt-get install -y --no-install-recommends software-properties-common gpg-agent \
         && add-apt-repository -y ppa:deadsnakes/ppa \
         && apt-get update \
         && apt-get install -y --no-install-recommends "python${PYTHON_VERSION}" "python${PYTHON_VERSION}-venv" "python${PYTHON_VERSION}-dev"; \
       else \
         apt-get install -y --no-install-recommends python3-venv; \
       fi \
    && rm -rf /var/lib/apt/lists/*

# One virtual environment for everything: no clash with the distribution's Python (PEP 668).
RUN if [ "${PYTHON_SOURCE}" = deadsnakes ]; then py="python${PYTHON_VERSION}"; else py=python3; fi \
    && "${py}" -m venv /opt/venv \
    && /opt/venv/bin/python --version
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:${PATH}

# Dependencies before source: this layer is rebuilt only when the lock changes.
COPY docker/a100.lock /opt/rlrecipes/docker/a100.lock
COPY scripts/install-lock.py /opt/rlrecipes/scripts/install-lock.py
COPY rlrecipes/recipe/images.py /opt/rlrecipes/rlrecipes/recipe/images.py
RUN --mount=type=cache,target=/root/.cache/pip \
    if [ "${SKIP_GPU_WHEELS}" = 1 ]; then set -- --skip-gpu; fi; \
    python /opt/rlrecipes/scripts/install-lock.py /opt/rlrecipes/docker/a100.lock "$@"

# FlashAttention from its prebuilt wheel (a compile takes hours and needs MAX_JOBS tuning). The wheel name
# encodes the C++ ABI torch was built with: read it from the installed torch, never assume it. With
# docker/flash-attn.lock produced (`make lock`) the wheel is checked against its sha256 -- if it names the ABI
# the installed torch has; a lock that was never produced leaves the version pin alone, and the log says so.
COPY docker/flash-attn.lock /opt/rlrecipes/docker/flash-attn.lock
RUN --mount=type=cache,target=/root/.cache/pip \
    if [ "${SKIP_GPU_WHEELS}" = 1 ]; then echo "SKIP_GPU_WHEELS=1: no flash-attn"; exit 0; fi; \
    abi=$(python -c "import torch; print(str(torch._C._GLIBCXX_USE_CXX11_ABI).upper())"); \
    if grep -q "^flash-attn @ .*/flash_attn-${FLASH_ATTN_VERSION}+.*cxx11abi${abi}-" /opt/rlrecipes/docker/flash-attn.lock; then \
      pip install --no-deps --require-hashes -r /opt/rlrecipes/docker/flash-attn.lock \
      && python -c "import flash_attn, torch; print('flash-attn', flash_attn.__version__, 'torch', torch.__version__)"; \
      exit; \
    fi; \
    echo "WARNING: docker/flash-attn.lock pins no flash-attn ${FLASH_ATTN_VERSION} wheel for ABI ${abi}: installing it unhashed"; \
    torch_mm=$(echo "${TORCH_VERSION}" | cut -d. -f1,2) \
    && cp="cp$(echo "${PYTHON_VERSION}" | tr -d .)" \
    && wheel="flash_attn-${FLASH_ATTN_VERSION}+cu12torch${torch_mm}cxx11abi${abi}-${cp}-${cp}-linux_x86_64.whl" \
    && pip install --no-deps "https://github.com/Dao-AILab/flash-attention/releases/download/v${FLASH_ATTN_VERSION}/${wheel}" \
    && python -c "import flash_attn, torch; print('flash-attn', flash_attn.__version__, 'torch', torch.__version__, 'cuda', torch.version.cuda)"

# Anchored edit to verl 0.8.0 (scripts/patch_verl.py --image a100); the build fails if its anchor does not match.
# rollout-skip-detokenize: verl's rollout is token-in/token-out, but vLLM detokenizes every token by default
#   (SamplingParams.detokenize=True). On an H200 with the Hopper stack the GPU sat idle the last 8-11 s of each
#   3B rollout phase while the server still returned responses (docs/bench/gpu-hopper-3b.md); verl 0.8.0's
#   generate has the same line. Off unless string stop/bad_words need it (verl PR #7679, open).
COPY scripts/patch_verl.py /opt/rlrecipes/scripts/patch_verl.py
RUN python /opt/rlrecipes/scripts/patch_verl.py --image a100 \
    && python /opt/rlrecipes/scripts/patch_verl.py --image a100 --check

# Fail the build, not the first training step, when the stack does not hold together.
# Under SKIP_GPU_WHEELS=1 verl itself cannot import (it needs torch): check the rest of the stack imports.
RUN if [ "${SKIP_GPU_WHEELS}" = 1 ]; then \
      python -c "import importlib.metadata as m, transformers, ray, hydra, datasets, fastapi, uvicorn, cachetools, lm_eval; \
assert m.version('verl') == '${VERL_VERSION}', m.version('verl'); print('verl', m.version('verl'), 'transformers', transformers.__version__)"; \
      exit; \
    fi; \
    python -c "import torch, vllm, verl, transformers; \
assert torch.__version__.split('+')[0] == '${TORCH_VERSION}', torch.__version__; \
assert torch.version.cuda.startswith('12.8'), torch.version.cuda; \
assert vllm.__version__ == '${VLLM_VERSION}', vllm.__version__; \
assert verl.__version__ == '${VERL_VERSION}', verl.__version__; \
print('torch', torch.__version__, 'vllm', vllm.__version__, 'verl', verl.__version__, 'transformers', transformers.__version__)" \
    && python /opt/rlrecipes/rlrecipes/recipe/images.py check-torch a100

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
    RLRECIPES_IMAGE=a100 \
    MODELS_DIR=/workspace/models \
    DATA_DIR=/workspace/data \
    CKPT_DIR=/workspace/checkpoints \
    LOG_DIR=/workspace/logs \
    HF_HOME=/workspace/hf-cache \
    RAY_DEDUP_LOGS=0
WORKDIR /workspace

ENTRYPOINT ["/usr/bin/tini", "--", "/opt/rlrecipes/scripts/entrypoint.sh"]
CMD ["shell"]

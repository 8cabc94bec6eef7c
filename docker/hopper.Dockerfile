# Hopper (and newer) image: verl 0.9.1 + vLLM 0.24.0 on CUDA 13.0, Python 3.12, torch 2.11.0. For H100/H200
# (sm_90) and newer GPUs on NVIDIA drivers >= 580 (CUDA 13.x); the A100 image stays on CUDA 12.8 / verl 0.8.0.
# Build:  make build-hopper   (docker build -f docker/hopper.Dockerfile -t rlrecipes/hopper:<tag> .)
# Every version below is an ARG with a pinned default; rlrecipes/recipe/images.py holds the same numbers and
# tests/recipe/test_images.py checks they agree. Python packages come from docker/hopper.lock (hashes, no resolver):
# verl's own `vllm` extra, which pins exactly torch 2.11.0, vLLM 0.24.0 and transformers 5.9.0.
# CI builds this file against a stand-in Debian base with SKIP_GPU_WHEELS=1 PYTHON_SOURCE=base (docs/images.md).
# RunPod variant (`make build-runpod IMAGE=hopper`): BASE_IMAGE=runpod/pytorch:1.0.2-cu1300-torch280-ubuntu2404
# PYTHON_SOURCE=base -- RunPod's /start.sh (SSH, Jupyter) on CUDA 13.0; its Ubuntu 24.04 python3 is 3.12 and its
# own torch stays outside our venv.
ARG BASE_IMAGE=nvidia/cuda:13.0.2-cudnn-devel-ubuntu24.04
FROM ${BASE_IMAGE}

ARG BASE_IMAGE=nvidia/cuda:13.0.2-cudnn-devel-ubuntu24.04
ARG CUDA_VERSION=13.0.2
ARG PYTHON_VERSION=3.12
ARG TORCH_VERSION=2.11.0
ARG VLLM_VERSION=0.24.0
ARG VERL_VERSION=0.9.1
ARG TRANSFORMERS_VERSION=5.9.0
ARG FLASH_ATTN_VERSION=2.8.3
# ubuntu: the base's own python3 (Ubuntu 24.04 ships 3.12, no PPA needed). base: the same, named as in the
# other images for CI's stand-in base (Debian, whose python3 is the version it has).
ARG PYTHON_SOURCE=ubuntu
# 0 (default): SDPA attention. Dao-AILab publishes no flash-attn wheel for CUDA 13 + torch 2.11
# (Dao-AILab/flash-attention#2442) and verl 0.9.1 guards its flash-attn imports. 1: install flash-attn
# FLASH_ATTN_VERSION from verl's own wheelhouse (cu130 / torch 2.11 / cp312 builds that verl's uv lock uses);
# then set the profile's attention to flash_attention_2. Not exercised by CI.
ARG WITH_FLASH_ATTN=0
ARG FLASH_ATTN_INDEX_URL=https://verl-project.github.io/verl-wheelhouse/simple/
# 1 = leave out torch, vLLM, Triton, FlashInfer and the CUDA runtime wheels (CI stand-in builds only).
ARG SKIP_GPU_WHEELS=0

LABEL org.opencontainers.image.title="rlrecipes-hopper" \
      org.opencontainers.image.description="verl ${VERL_VERSION} GRPO/PPO recipes for Hopper and newer GPUs: vLLM ${VLLM_VERSION}, transformers ${TRANSFORMERS_VERSION}, torch ${TORCH_VERSION}, CUDA ${CUDA_VERSION} (driver >= 580), Python ${PYTHON_VERSION}" \
      io.rlrecipes.image="hopper" \
      io.rlrecipes.base="${BASE_IMAGE}" \
      io.rlrecipes.cuda="${CUDA_VERSION}" \
      io.rlrecipes.torch="${TORCH_VERSION}" \
      io.rlrecipes.python="${PYTHON_VERSION}" \
      io.rlrecipes.verl="${VERL_VERSION}" \
      io.rlrecipes.vllm="${VLLM_VERSION}" \
      io.rlrecipes.transformers="${TRANSFORMERS_VERSION}" \
      io.rlrecipes.flash-attn="${WITH_FLASH_ATTN}" \
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
    && if [ "${PYTHON_SOURCE}" = ubuntu ]; then \
         apt-get install -y --no-install-recommends "python${PYTHON_VERSION}" "python${PYTHON_VERSION}-venv" "python${PYTHON_VERSION}-dev"; \
       fi \
    && rm -rf /var/lib/apt/lists/*

# One virtual environment for everything: no clash with the distribution's Python (PEP 668).
RUN if [ "${PYTHON_SOURCE}" = ubuntu ]; then py="python${PYTHON_VERSION}"; else py=python3; fi \
    && "${py}" -m venv /opt/venv \
    && /opt/venv/bin/python --version
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:${PATH}

# Dependencies before source: this layer is rebuilt only when the lock changes.
COPY docker/hopper.lock /opt/rlrecipes/docker/hopper.lock
COPY scripts/install-lock.py /opt/rlrecipes/scripts/install-lock.py
COPY rlrecipes/recipe/images.py /opt/rlrecipes/rlrecipes/recipe/images.py
RUN --mount=type=cache,target=/root/.cache/pip \
    if [ "${SKIP_GPU_WHEELS}" = 1 ]; then set -- --skip-gpu; fi; \
    python /opt/rlrecipes/scripts/install-lock.py /opt/rlrecipes/docker/hopper.lock "$@"

# Anchored edits to verl 0.9.1 (scripts/patch_verl.py --image hopper); the build fails if an anchor does not match.
# critic-attn: verl loads the critic with FlashAttention-2 whatever its config says (verl #5210, open), and this
#   image has no flash-attn: PPO would fail at start-up. Both sites take the config's attention instead.
# rollout-skip-detokenize: verl's rollout is token-in/token-out, but vLLM detokenizes every token by default
#   (SamplingParams.detokenize=True); on an H200 the GPU sat idle the last 8-11 s of each 3B rollout phase while
#   the server still returned responses (docs/bench/gpu-hopper-3b.md). Off unless string stop/bad_words need
#   it (verl PR #7679, open).
# rows-on-host: verl's FSDP engine copies each micro batch to the GPU with every per-row non-tensor field the rollout
#   stored (prompt messages, reward_model, ...), which TensorDict.to() rebuilds row by row and the engine never reads;
#   the edit leaves them out of the copy. The canary's training phases took a third less time on one H200
#   (docs/bench/gpu-overhead.md, "The seventh sitting").
COPY scripts/patch_verl.py /opt/rlrecipes/scripts/patch_verl.py
RUN python /opt/rlrecipes/scripts/patch_verl.py --image hopper \
    && python /opt/rlrecipes/scripts/patch_verl.py --image hopper --check

# Optional FlashAttention-2 from verl's wheelhouse (see WITH_FLASH_ATTN above); --no-deps keeps the lock's torch.
RUN --mount=type=cache,target=/root/.cache/pip \
    if [ "${WITH_FLASH_ATTN}" != 1 ] || [ "${SKIP_GPU_WHEELS}" = 1 ]; then echo "flash-attn: not installed (SDPA)"; exit 0; fi; \
    pip install --no-deps --index-url "${FLASH_ATTN_INDEX_URL}" "flash-attn==${FLASH_ATTN_VERSION}" \
    && python -c "import flash_attn, torch; print('flash-attn', flash_attn.__version__, 'torch', torch.__version__, 'cuda', torch.version.cuda)"

# Fail the build, not the first training step, when the stack does not hold together.
# Under SKIP_GPU_WHEELS=1 verl itself cannot import (it needs torch): check the rest of the stack imports.
RUN if [ "${SKIP_GPU_WHEELS}" = 1 ]; then \
      python -c "import importlib.metadata as m, transformers, ray, hydra, datasets, fastapi, uvicorn, cachetools, transfer_queue, lm_eval; \
assert m.version('verl') == '${VERL_VERSION}', m.version('verl'); \
assert transformers.__version__ == '${TRANSFORMERS_VERSION}', transformers.__version__; \
print('verl', m.version('verl'), 'transformers', transformers.__version__)"; \
      exit; \
    fi; \
    python -c "import torch, vllm, verl, transformers; \
assert torch.__version__.split('+')[0] == '${TORCH_VERSION}', torch.__version__; \
assert torch.version.cuda.startswith('13.0'), torch.version.cuda; \
assert vllm.__version__ == '${VLLM_VERSION}', vllm.__version__; \
assert verl.__version__ == '${VERL_VERSION}', verl.__version__; \
assert transformers.__version__ == '${TRANSFORMERS_VERSION}', transformers.__version__; \
print('torch', torch.__version__, 'vllm', vllm.__version__, 'verl', verl.__version__, 'transformers', transformers.__version__)" \
    && python /opt/rlrecipes/rlrecipes/recipe/images.py check-torch hopper

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
# VLLM_USE_FLASHINFER_SAMPLER=0: vLLM's own sampler; FlashInfer's JIT sampler needs nvcc and time at first use.
ENV RLRECIPES_HOME=/opt/rlrecipes \
    RLRECIPES_IN_IMAGE=1 \
    RLRECIPES_IMAGE=hopper \
    MODELS_DIR=/workspace/models \
    DATA_DIR=/workspace/data \
    CKPT_DIR=/workspace/checkpoints \
    LOG_DIR=/workspace/logs \
    HF_HOME=/workspace/hf-cache \
    RAY_DEDUP_LOGS=0 \
    VLLM_USE_FLASHINFER_SAMPLER=0
WORKDIR /workspace

ENTRYPOINT ["/usr/bin/tini", "--", "/opt/rlrecipes/scripts/entrypoint.sh"]
CMD ["shell"]

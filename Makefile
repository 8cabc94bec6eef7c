# rlrecipes: containerized verl recipes. `make` (or `make help`) lists the targets.
# Every target delegates to the rlrecipes CLI or a script under scripts/; nothing here is logic.
# Typical GPU host:  make build-a100 && make train         (needs Docker, make and python3; nothing else)
#                    make build-p40 && make train RECIPE=qwen2.5-0.5b-gsm8k-ppo GPUS=1
# Any host:          make plan validate test
# Host-side targets get the rlrecipes CLI from the light .venvs/host (made on demand, no torch); only the
# checks (test, validate, lint, lock, bench) use the CPU test environment .venvs/dev.

# ---- what to run ------------------------------------------------------------------------------------------
RECIPE ?= qwen2.5-3b-gsm8k-grpo-lora
# Empty = the recipe's own profile (recipes/profiles/<name>.yaml), e.g. PROFILE=h100-80gb.
PROFILE ?=
# GPUs compose.yaml reserves for the stages that run in the image: all or a count (scripts/in-image.sh).
GPUS ?= all
# Image that `make test-gpu` runs the GPU test tier in: p40 (verl 0.5.0; smoke + P40 fit), a100, hopper.
IMAGE_FAMILY ?= p40
# Run name under CKPT_DIR/LOG_DIR that merge/eval/report read (default: the recipe's own run).
RUN ?= $(RECIPE)
# Extra Hydra overrides for plan/validate/train/resume, e.g. ARGS='trainer.total_epochs=2'; extra options for others.
ARGS ?=
# `make reproduce` of a recipe built offline (the canaries): the seed of its data and warm start; the run keeps to
# seed-N/ folders of its own. Empty = the builder's seed 0 in the usual folders.
SEED ?=
# Head node address for ray-worker (host:port).
HEAD ?=
# Which image build-runpod builds on RunPod's base: a100 or hopper (H100/H200, driver >= 580).
RUNPOD_IMAGE_FAMILY ?= a100

# ---- where things live ------------------------------------------------------------------------------------
MODELS_DIR ?= /workspace/models
CKPT_DIR ?= /workspace/checkpoints
LOG_DIR ?= /workspace/logs

# ---- tools ------------------------------------------------------------------------------------------------
PYTHON ?= python3
VENVS ?= .venvs
VENV ?= $(VENVS)/dev
RLRECIPES ?= $(VENV)/bin/rlrecipes
HOST_VENV ?= $(VENVS)/host
PYTEST_ARGS ?=
# `make test` runs on this many pytest-xdist workers: one per core, at most 4 (in a CI run, ps showed a worker at
# 0.6-0.8 GB and each verl process it starts at 0.3-0.5 GB more; the Docker tests share one worker, ~10 minutes
# alone, so more workers gain little)
PYTEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ "$$n" -gt 4 ] && n=4; echo "$$n")
# `make mutation`: modules and time limit, e.g. MUTATION_ARGS='scorer memory --minutes 5'
MUTATION_ARGS ?=
VERL_VERSIONS := 0.5.0 0.8.0 0.9.1
VERL_STAMPS := $(foreach v,$(VERL_VERSIONS),$(VENVS)/verl-$(v)/.stamp)
PROFILE_ARG = $(if $(PROFILE),--profile $(PROFILE))
SEED_ARG = $(if $(SEED),--seed $(SEED))
HOST_ENV = RLRECIPES_HOST_VENV=$(HOST_VENV) PYTHON=$(PYTHON)
HOST_RLRECIPES = $(HOST_ENV) scripts/host-python.sh -m rlrecipes
STAGE_ENV = RECIPE=$(RECIPE) PROFILE=$(PROFILE) GPUS=$(GPUS) $(HOST_ENV)

.DEFAULT_GOAL := help

.PHONY: help host env envs test test-gpu test-images-full mutation lint lock bench \
	build-a100 build-hopper build-p40 build-runpod build-watchdog \
	plan validate launchers verl-schema data model preflight train resume merge eval report reproduce monitor smoke \
	ray-head ray-worker runpod-template

help: ## list the targets (variables: RECIPE, PROFILE, GPUS, RUN, ARGS)
	@awk 'BEGIN {FS = ":.*## "} /^[a-z0-9-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# ---- environments -----------------------------------------------------------------------------------------
host: ## make the light host environment .venvs/host (rlrecipes CLI, no torch); host targets do it on demand
	$(HOST_ENV) scripts/host-python.sh

env: $(VENV)/.stamp ## build the CPU test environment .venvs/dev from requirements/dev.txt

$(VENV)/.stamp: requirements/dev.txt pyproject.toml
	PYTHON=$(PYTHON) scripts/mkvenv.sh $(VENV) requirements/dev.txt

envs: $(VERL_STAMPS) ## build .venvs/verl-0.5.0, -0.8.0 and -0.9.1 (real verl, CPU torch) for validation

# uv from the test environment installs these (scripts/mkvenv.sh: MKVENV_UV), hence the order-only prerequisite.
$(VENVS)/verl-%/.stamp: requirements/verl-%-cpu.txt pyproject.toml | $(VENV)/.stamp
	PYTHON=$(PYTHON) MKVENV_UV=$(VENV)/bin/uv scripts/mkvenv.sh $(VENVS)/verl-$* requirements/verl-$*-cpu.txt --with-repo

# ---- checks -----------------------------------------------------------------------------------------------
test: env envs ## run the default CPU test suite (docker tests too when a daemon can be started)
	$(VENV)/bin/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

mutation: env ## mutmut over the core-rule modules, one bounded run each (MUTATION_ARGS='scorer --minutes 5')
	$(VENV)/bin/python scripts/mutation.py $(MUTATION_ARGS)

test-gpu: ## on a GPU host: the gpu test tier inside IMAGE_FAMILY's image (offline: PYTEST_WHEELS=dir)
	scripts/require-gpu.sh test-gpu
	IMAGE_FAMILY=$(IMAGE_FAMILY) GPUS=$(GPUS) scripts/test-gpu.sh $(PYTEST_ARGS)

test-images-full: env ## opt-in, slow (GBs): install each GPU image's lock for real into its Python, pip check, imports
	RLRECIPES_IMAGES_FULL=1 $(VENV)/bin/python -m pytest tests/repo/test_images_full.py -s $(PYTEST_ARGS)

lint: env ## hadolint, shellcheck, mbake validate, compose config for every profile, launchers --check
	VENV=$(VENV) scripts/lint.sh

lock: env ## refresh every pin: docker/*.lock (uv, hashes), P40 torch+cu118 (explicit index), base digests, flash-attn sha256
	$(VENV)/bin/python scripts/lock.py

bench: env ## run every benchmarks/bench_*.py and print their figures
	$(VENV)/bin/python benchmarks/run.py

# ---- images -----------------------------------------------------------------------------------------------
build-a100: ## build the A100/H100 image (verl 0.8.0, vLLM, CUDA 12.8); needs a GPU host
	scripts/require-gpu.sh build-a100 a100
	$(HOST_ENV) scripts/build-image.sh a100

build-hopper: ## build the Hopper image (verl 0.9.1, vLLM 0.24, CUDA 13.0, driver >= 580); needs a GPU host
	scripts/require-gpu.sh build-hopper hopper
	$(HOST_ENV) scripts/build-image.sh hopper

build-p40: ## build the P40 image (verl 0.5.0 patched, HF rollout, CUDA 11.8); needs a GPU host
	scripts/require-gpu.sh build-p40 p40
	$(HOST_ENV) scripts/build-image.sh p40

build-runpod: ## build the A100 (RUNPOD_IMAGE_FAMILY=hopper: Hopper) image on RunPod's PyTorch base (its /start.sh)
	scripts/require-gpu.sh build-runpod $(RUNPOD_IMAGE_FAMILY)
	$(HOST_ENV) scripts/build-image.sh $(RUNPOD_IMAGE_FAMILY) --runpod

build-watchdog: ## build the checkpoint watchdog sidecar image (any host)
	scripts/build-image.sh watchdog

# ---- recipe stages ----------------------------------------------------------------------------------------
plan: ## print the resolved plan of RECIPE (image, GPUs, batches, steps, checkpoints, launch)
	$(HOST_RLRECIPES) plan $(RECIPE) $(PROFILE_ARG) $(ARGS)

validate: env envs ## validate RECIPE against the real schema of its verl version (CPU)
	$(RLRECIPES) validate $(RECIPE) $(PROFILE_ARG) $(ARGS)

launchers: ## regenerate recipes/*.sh from the recipe YAML files
	$(HOST_RLRECIPES) launchers

verl-schema: env envs ## regenerate rlrecipes/verl/schema/*.json (the keys plan checks) from each pinned verl
	$(VENV)/bin/python scripts/verl_schema.py

data: ## prepare RECIPE's dataset as verl parquet in the data volume, in its image without GPUs (skipped if present)
	$(STAGE_ENV) GPUS=none scripts/in-image.sh data $(ARGS)

model: ## download RECIPE's base model into the models volume, in its image (honours HF_TOKEN, HF_HUB_OFFLINE=1)
	$(STAGE_ENV) GPUS=none scripts/in-image.sh model $(ARGS)

preflight: ## check GPUs, memory, disk, shm, model and data for RECIPE (in its image)
	$(STAGE_ENV) scripts/in-image.sh preflight $(ARGS)

train: ## train RECIPE in its image: data and model if missing, resume-check, preflight, the launcher
	scripts/require-gpu.sh train
	$(STAGE_ENV) scripts/in-image.sh run $(ARGS)

resume: ## repair the checkpoint tracker of RECIPE, then train (continues at the last complete step)
	scripts/require-gpu.sh resume
	$(STAGE_ENV) scripts/in-image.sh resume $(ARGS)

merge: ## merge RUN's latest checkpoint into a Hugging Face model under MODELS_DIR/RUN-merged
	$(STAGE_ENV) scripts/in-image.sh merge $(CKPT_DIR)/$(RUN) --recipe $(RECIPE) --out $(MODELS_DIR)/$(RUN)-merged $(ARGS)

eval: ## lm-eval GSM8K on the merged RUN against its base model (plus the fast check on RECIPE's validation file)
	$(STAGE_ENV) scripts/in-image.sh eval $(MODELS_DIR)/$(RUN)-merged $(ARGS)

report: ## plots + report.md/html from RUN's logs into ./reports/RUN (after eval: ARGS='--eval /workspace/models/RUN-merged/eval')
	$(STAGE_ENV) GPUS=none scripts/in-image.sh report $(LOG_DIR)/$(RUN) --out /workspace/reports/$(RUN) $(ARGS)

reproduce: ## RECIPE from nothing to its verdict: data/model, train, merge, eval, report, expect (reruns resume)
	scripts/require-gpu.sh reproduce
	$(STAGE_ENV) scripts/in-image.sh reproduce $(RECIPE) $(PROFILE_ARG) $(SEED_ARG) $(ARGS)

monitor: ## watch GPU use with nvitop (ARGS=--once prints once)
	$(STAGE_ENV) scripts/in-image.sh nvitop $(ARGS)

smoke: ## on a GPU: train the smoke recipes, kill, resume, merge; print a pass/fail table
	scripts/require-gpu.sh smoke
	$(STAGE_ENV) scripts/in-image.sh smoke $(ARGS)

# ---- clusters and clouds ----------------------------------------------------------------------------------
ray-head: ## start a Ray head node for a multi-node run (scripts/ray-node.sh)
	scripts/ray-node.sh head $(ARGS)

ray-worker: ## join this node to the Ray head at HEAD=host:port (scripts/ray-node.sh)
	scripts/ray-node.sh worker $(HEAD) $(ARGS)

runpod-template: ## validate deploy/runpod/template.json and print the RunPod create command
	$(HOST_RLRECIPES) runpod-template

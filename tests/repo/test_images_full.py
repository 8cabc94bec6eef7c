"""Opt-in (`make test-images-full`, RLRECIPES_IMAGES_FULL=1; not in the default run): each GPU image's lock
installed for real -- every wheel from PyPI, GPU wheels included -- into a fresh virtual environment of the
image's Python, standing in for the image (no CUDA base, no GPU), then `pip check`, the Dockerfile's own version
asserts, its arch check, and imports of verl's trainer and vLLM's engine modules.

- A100: Python 3.12, docker/a100.lock (torch 2.8.0 = PyPI's CUDA 12.8 build, vLLM 0.11.0, verl 0.8.0); the
  FlashAttention wheel is not on PyPI and is left out.
- P40: Python 3.10 with pip 22.0.2 (Ubuntu 22.04's), torch 2.6.0 from PyPI (its CUDA 12.4 build, standing in
  for 2.6.0+cu118, which only the PyTorch index has), docker/p40.lock, the verl patch applied and checked.

Several GB of downloads; results and times are recorded in docs/images.md."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WORK = Path(os.environ.get("RLRECIPES_IMAGES_FULL_DIR", REPO / ".cache" / "images-full"))

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.environ.get("RLRECIPES_IMAGES_FULL") != "1",
                                                   reason="opt-in: make test-images-full")]


def interpreter(version: str) -> str:
    """python<version> that runs: on PATH, or a pyenv-installed one (whose shim may refuse when not selected)."""
    candidates = [shutil.which(f"python{version}"),
                  *sorted(map(str, Path.home().glob(f".pyenv/versions/{version}.*/bin/python{version}")))]
    for found in filter(None, candidates):
        if subprocess.run([found, "-c", "pass"], capture_output=True).returncode == 0:
            return found
    pytest.skip(f"no working python{version} (PATH or ~/.pyenv/versions)")


def sh(*argv, timeout=3600, env=None) -> subprocess.CompletedProcess:
    start = time.monotonic()
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, cwd=REPO,
                          env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", **(env or {})))
    print(f"[{time.monotonic() - start:6.0f} s] {' '.join(map(str, argv))[:160]} -> {proc.returncode}")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc


def fresh_venv(name: str, version: str) -> Path:
    venv = WORK / name
    shutil.rmtree(venv, ignore_errors=True)
    WORK.mkdir(parents=True, exist_ok=True)
    sh(interpreter(version), "-m", "venv", venv)
    return venv / "bin" / "python"


IMPORTS_A100 = """
import importlib, torch, vllm, verl, transformers
assert torch.__version__.split('+')[0] == '2.8.0', torch.__version__
assert torch.version.cuda.startswith('12.8'), torch.version.cuda
assert vllm.__version__ == '0.11.0', vllm.__version__
assert verl.__version__ == '0.8.0', verl.__version__
assert transformers.__version__.startswith('4.'), transformers.__version__
for name in ('verl.trainer.main_ppo', 'verl.trainer.ppo.ray_trainer', 'vllm.engine.arg_utils',
             'vllm.v1.engine.llm_engine', 'vllm.v1.engine.async_llm'):
    importlib.import_module(name)
print('ok', torch.__version__, vllm.__version__, verl.__version__, transformers.__version__)
"""

IMPORTS_P40 = """
import importlib, importlib.util, torch, verl, transformers
assert torch.__version__.split('+')[0] == '2.6.0', torch.__version__
assert verl.__version__ == '0.5.0', verl.__version__
assert transformers.__version__.startswith('4.'), transformers.__version__
assert importlib.util.find_spec('flash_attn') is None, 'flash-attn must stay out of the P40 image'
for name in ('verl.trainer.main_ppo', 'verl.trainer.ppo.ray_trainer', 'verl.workers.fsdp_workers',
             'verl.workers.rollout.hf_rollout'):
    importlib.import_module(name)
print('ok', torch.__version__, verl.__version__, transformers.__version__)
"""


def test_a100_lock_installs_for_real_on_python_312():
    python = fresh_venv("a100", "3.12")
    sh(python, "scripts/install-lock.py", "docker/a100.lock")  # --require-hashes, then pip check
    sh(python, "rlrecipes/recipe/images.py", "check-torch", "a100")
    print(sh(python, "-c", IMPORTS_A100).stdout)


def test_p40_lock_installs_for_real_on_python_310_with_pip_22():
    python = fresh_venv("p40", "3.10")
    sh(python, "-m", "pip", "install", "pip==22.0.2")
    sh(python, "-m", "pip", "install", "torch==2.6.0")  # PyPI's cu124 build, standing in for +cu118
    sh(python, "rlrecipes/recipe/images.py", "check-torch", "p40")
    sh(python, "scripts/install-lock.py", "docker/p40.lock")
    sh(python, "scripts/patch_verl.py", "--image", "p40")
    sh(python, "scripts/patch_verl.py", "--image", "p40", "--check")
    print(sh(python, "-c", IMPORTS_P40).stdout)

"""Shared fixtures. Tiers: default CPU-only; `gpu`, `docker` and `verl` markers skip cleanly when the
thing they need is absent (set RLRECIPES_REQUIRE_VERL=1 / RLRECIPES_REQUIRE_DOCKER=1 in CI to turn
such a skip into a failure, so a broken install step cannot hide behind a skip)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _skip_or_fail(reason: str, require_env: str) -> None:
    if os.environ.get(require_env) == "1":
        pytest.fail(f"{reason} (required because {require_env}=1)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def verl_python():
    """Factory: verl_python("0.5.0") -> Path of an interpreter with that verl, or skip."""

    def find(version: str) -> Path:
        from rlrecipes.errors import RecipeError
        from rlrecipes.verl.env import python_for

        try:
            return python_for(version)
        except RecipeError as exc:
            _skip_or_fail(str(exc), "RLRECIPES_REQUIRE_VERL")
            raise  # unreachable

    return find


@pytest.fixture
def run_in_verl(verl_python):
    """Factory: run_in_verl("0.5.0", "python code", timeout=120) -> CompletedProcess (repo on PYTHONPATH)."""

    def run(version: str, code: str, timeout: int = 300, **kwargs) -> subprocess.CompletedProcess:
        env = dict(os.environ, PYTHONPATH=str(REPO), **kwargs.pop("env", {}))
        return subprocess.run(
            [str(verl_python(version)), "-c", code],
            capture_output=True, text=True, timeout=timeout, env=env, cwd=kwargs.pop("cwd", REPO), **kwargs,
        )

    return run


def has_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def pytest_collection_modifyitems(config, items):
    if has_gpu():
        return
    skip_gpu = pytest.mark.skip(reason="needs an NVIDIA GPU (nvidia-smi -L failed or is absent)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)

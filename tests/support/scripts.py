"""The repository's benchmark scripts as modules, for tests that call their functions: a script is not a package
member, so it is loaded from its path, once per test process."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


@functools.cache
def script_module(relative: str) -> ModuleType:
    """`benchmarks/gpu/levers_table.py` (a path under the repository) as a module."""
    path = REPO / relative
    name = f"rlrecipes_script_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    # registered under its name first, as an import does: a dataclass in it looks its module up there
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

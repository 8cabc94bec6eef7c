"""The strict reading every recipe, profile and expect: block goes through: YAML read as OmegaConf reads it,
unknown keys refused with the nearest valid names, types checked, each error naming its key path."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml  # OmegaConf's loader raises PyYAML's errors
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rlrecipes.errors import RecipeError
from rlrecipes.recipe import overrides as ov


def _strict(data: Any, allowed: dict[str, bool], where: str) -> dict:
    """Check a mapping's keys: `allowed` maps key -> required. Unknown keys fail with suggestions."""
    if not isinstance(data, dict):
        raise RecipeError(f"expected a mapping, got {type(data).__name__}", where=where)
    for key in data:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), list(allowed), n=3, cutoff=0.5)
            hint = f"did you mean {', '.join(close)}?" if close else f"valid keys: {', '.join(allowed)}"
            raise RecipeError(f"unknown key '{key}'", where=f"{where}.{key}" if where else str(key), hint=hint)
    for key, required in allowed.items():
        if required and key not in data:
            raise RecipeError(f"missing required key '{key}'", where=where)
    return data


def _typed(value: Any, kind: type | tuple, where: str) -> Any:
    if isinstance(value, bool) and kind in (int, float):
        raise RecipeError(f"expected {kind.__name__}, got a boolean", where=where)
    if not isinstance(value, kind):
        name = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise RecipeError(f"expected {name}, got {type(value).__name__} ({value!r})", where=where)
    return value


def _choice(value: Any, choices: tuple[str, ...], where: str) -> str:
    if value not in choices:
        raise RecipeError(f"{value!r} is not one of {', '.join(choices)}", where=where)
    return value


def _load_yaml(path: Path) -> dict:
    """Read a recipe or profile through OmegaConf, as verl and Hydra read their configs.

    OmegaConf's loader rejects a duplicate key (PyYAML silently keeps the last one: a second
    `profile:` moved a run to other GPUs) and reads `1e-6` as a float (PyYAML: a string).
    Interpolations (`${...}`) are kept as written: verl resolves them.
    """
    try:
        with path.open(encoding="utf-8") as fh:
            conf = OmegaConf.load(fh)
    except FileNotFoundError:
        raise RecipeError("file not found", where=str(path)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise RecipeError(f"malformed YAML: {getattr(exc, 'problem', None) or exc}", where=where) from None
    except (OmegaConfBaseException, UnicodeDecodeError) as exc:
        raise RecipeError(f"malformed YAML: {exc}".splitlines()[0], where=str(path)) from None
    if not isinstance(conf, DictConfig) or not len(conf):
        raise RecipeError("a recipe or profile must be a YAML mapping", where=str(path))
    return OmegaConf.to_container(conf, resolve=False)


def _verl_block(block: Any, where: str) -> dict[str, Any]:
    if block is None:
        return {}
    _typed(block, dict, where)
    flat = ov.flatten(block)
    for key in flat:
        bare = ov.bare_key(key)
        if not bare or any(not part for part in bare.split(".")):
            raise RecipeError(f"malformed verl key {key!r}", where=where)
    return flat

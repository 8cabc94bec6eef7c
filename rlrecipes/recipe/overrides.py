"""Hydra-style `key=value` overrides: the one override syntax used everywhere (recipes, profiles,
the command line, generated launchers), parsed with Hydra's own override parser.

Internally overrides are a dict whose keys carry Hydra's prefix: `k` (change), `+k` (add a key that
verl's schema lacks), `++k` (add or change), `~k` (delete).
"""

from __future__ import annotations

import math
import re
import shlex
from typing import Any

from rlrecipes.errors import RecipeError

_VAR = re.compile(r"\$\{([A-Z][A-Z0-9_]*)\}")
_PREFIXES = ("++", "+", "~")


def _parser():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


def bare_key(key: str) -> str:
    for prefix in _PREFIXES:
        if key.startswith(prefix):
            return key[len(prefix):]
    return key


def parse_cli(items: list[str], where: str = "command line") -> dict[str, Any]:
    """Parse `key=value` strings with Hydra's grammar into {prefixed_key: python value}."""
    from hydra.errors import HydraException

    parser = _parser()
    result: dict[str, Any] = {}
    for item in items:
        try:
            override = parser.parse_override(item)
        except HydraException as exc:
            raise RecipeError(f"cannot parse override {item!r}: {exc}", where=where,
                              hint="use Hydra syntax: key=value, +new.key=value, key=[a,b], key={x:1}") from None
        if override.is_sweep_override():
            raise RecipeError(f"sweeps are not supported in an override: {item!r}", where=where)
        key = override.key_or_group
        if not key or any(not part for part in key.split(".")):
            raise RecipeError(f"override {item!r} has no key", where=where, hint="use key=value")
        if override.package:
            raise RecipeError(f"package overrides (@) are not supported: {item!r}", where=where)
        prefix = "~" if override.is_delete() else "++" if override.is_force_add() else "+" if override.is_add() else ""
        result[prefix + key] = None if override.is_delete() else _plain(override.value())
    return result


def _plain(value: Any) -> Any:
    """Hydra returns its own str/list/dict subclasses; turn them into plain Python values."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value)


def _format_float(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    text = repr(value)
    return text


def _quote(text: str) -> str:
    """Hydra's quoted string: backslashes are literal except a run of them before a quote or the closing
    quote, where each is doubled (doubling every backslash turned `a\\nb` into `a\\\\nb`)."""
    text = re.sub(r"(\\*)'", lambda m: m.group(1) * 2 + "\\'", text)
    text = re.sub(r"(\\+)$", lambda m: m.group(1) * 2, text)
    return "'" + text + "'"


def format_value(value: Any) -> str:
    """Render a Python value in Hydra's override grammar (round-trips through parse_cli)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _format_float(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{format_value(v)}" for k, v in value.items()) + "}"
    text = str(value)
    if _VAR.search(text):
        # Expanded by the shell before Hydra sees it; quoting keeps paths with spaces intact.
        return text if _VAR.fullmatch(text) else _quote(text)
    if re.fullmatch(r"[A-Za-z_/][A-Za-z0-9_./:-]*", text) and _roundtrips(text):
        return text
    return _quote(text)


def _roundtrips(text: str) -> bool:
    try:
        return _parser().parse_override(f"k={text}").value() == text
    except Exception:  # noqa: BLE001 -- any parse failure means "quote it"
        return False


def format_override(key: str, value: Any) -> str:
    if key.startswith("~"):
        return key
    return f"{key}={format_value(value)}"


def shell_word(override: str) -> str:
    """Quote one override for a POSIX shell; `${VAR}` references stay expandable."""
    if _VAR.search(override):
        escaped = override.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`")
        escaped = re.sub(r"\$(?!\{[A-Z][A-Z0-9_]*\})", r"\\$", escaped)
        return f'"{escaped}"'
    return shlex.quote(override)


def substitute(value: Any, variables: dict[str, Any]) -> Any:
    """Replace `${VAR}` references by their values (a whole-value reference keeps the value's type)."""
    if isinstance(value, str):
        whole = _VAR.fullmatch(value)
        if whole:
            return _lookup(whole.group(1), variables)
        return _VAR.sub(lambda m: str(_lookup(m.group(1), variables)), value)
    if isinstance(value, list):
        return [substitute(v, variables) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, variables) for k, v in value.items()}
    return value


def variables_in(value: Any) -> set[str]:
    if isinstance(value, str):
        return set(_VAR.findall(value))
    if isinstance(value, list):
        return set().union(*(variables_in(v) for v in value)) if value else set()
    if isinstance(value, dict):
        return set().union(*(variables_in(v) for v in value.values())) if value else set()
    return set()


def _lookup(name: str, variables: dict[str, Any]) -> Any:
    if name not in variables:
        raise RecipeError(f"unknown variable ${{{name}}}", hint=f"known variables: {', '.join(sorted(variables))}")
    return variables[name]


def flatten(mapping: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested YAML mappings -> dotted keys. A key that already has dots is kept as written."""
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        full = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value and not full.startswith(("+", "~")) and not _is_leaf_dict(full):
            flat.update(flatten(value, full))
        else:
            flat[full] = value
    return flat


# verl keys whose value is itself a mapping (set as a whole, not key by key).
_DICT_VALUED = ("mixed_precision", "override_config", "reward_kwargs")


def _is_leaf_dict(key: str) -> bool:
    return key.rsplit(".", 1)[-1] in _DICT_VALUED

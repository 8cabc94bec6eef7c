"""verl's config keys without verl: which Hydra overrides name a key of `ppo_trainer`, and the nearest
names when one does not.

`validate` composes the config with verl's own Hydra tree (verl/check.py); `plan` runs in the light host
environment, which has no verl. Both ask this module: check.py for the suggestions it prints beside
Hydra's error, plan for the error itself, against a snapshot of the composed default config of each pinned
verl (rlrecipes/verl/schema/verl-<version>.json). The snapshots are generated from the real verl by
`make verl-schema` (scripts/verl_schema.py, which runs `python -m rlrecipes.verl.check --schema` in each
version's interpreter) and never edited by hand; tests/recipe/test_verl_schema.py fails when one is stale.

The override rules are Hydra's (hydra/_internal/config_loader_impl.py `_apply_overrides_to_config` on a
struct config, which is what verl's compose gives): `key=v` must name an existing key (a mapping value is
merged, so its keys must exist too), `~key` must name one, `+key=v` adds a key (an error only when a
non-null scalar is already there), `++key=v` adds or sets anything. Config group overrides (`key` naming
a directory of verl's config tree) and `hydra.*` are left to `validate`.

Standard library only: verl/check.py imports it inside a foreign verl interpreter.
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

SCHEMA_DIR = Path(__file__).resolve().parent / "schema"

# Keys that popular guides recommend but verl does not have, with verl's real name.
KNOWN_MISNOMERS = {
    "trainer.save_total_limit": ["trainer.max_actor_ckpt_to_keep", "trainer.max_critic_ckpt_to_keep"],
    "trainer.save_steps": ["trainer.save_freq"],
    "trainer.eval_steps": ["trainer.test_freq"],
    "trainer.num_train_epochs": ["trainer.total_epochs"],
    "trainer.output_dir": ["trainer.default_local_dir"],
    "actor_rollout_ref.actor.learning_rate": ["actor_rollout_ref.actor.optim.lr"],
    "actor_rollout_ref.actor.lr": ["actor_rollout_ref.actor.optim.lr"],
    "actor_rollout_ref.model.lora_r": ["actor_rollout_ref.model.lora_rank"],
    "data.batch_size": ["data.train_batch_size"],
}

# A key tree: a mapping node is a dict of its children; a leaf is the name of its value's type.
Tree = dict


def leaf_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, (list, tuple)):
        return "list"
    return "str"


def tree_of(container: Any) -> Any:
    """The key tree of a plain config container (`OmegaConf.to_container(cfg, resolve=False)`)."""
    if isinstance(container, Mapping):
        return {str(k): tree_of(v) for k, v in container.items()}
    return leaf_type(container)


def flat_keys(tree: Tree, prefix: str = "") -> dict[str, str]:
    """{dotted key: "dict" or the leaf's type}, every mapping node included (an empty one has no child)."""
    flat: dict[str, str] = {}
    for name, node in tree.items():
        path = f"{prefix}.{name}" if prefix else name
        if isinstance(node, dict):
            flat[path] = "dict"
            flat.update(flat_keys(node, path))
        else:
            flat[path] = node
    return flat


def tree_from_flat(flat: Mapping[str, str]) -> Tree:
    tree: Tree = {}
    for path in sorted(flat, key=lambda p: p.count(".")):
        parent, _, name = path.rpartition(".")
        node = tree
        for part in parent.split(".") if parent else ():
            node = node[part]
        node[name] = {} if flat[path] == "dict" else flat[path]
    return tree


def _node(tree: Tree, path: str) -> Any:
    """The node at a dotted path, or None when absent (OmegaConf.select's answer, also for a null value)."""
    node: Any = tree
    for part in path.split(".") if path else ():
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return None if node == "null" else node


def suggest(bad_key: str, tree: Tree) -> list[str]:
    """Up to three existing keys close to `bad_key`: the misnomer table first, else the closest names
    under its deepest existing parent."""
    if bad_key in KNOWN_MISNOMERS:
        return KNOWN_MISNOMERS[bad_key]
    parent, _, leaf = bad_key.rpartition(".")
    node = _node(tree, parent)
    # walk up to the deepest existing parent
    while node is None and parent:
        parent, _, leaf = parent.rpartition(".")
        node = _node(tree, parent)
    if not isinstance(node, dict):
        return []
    names = list(node)
    close = difflib.get_close_matches(leaf, names, n=3, cutoff=0.6)
    # also match on any word of the leaf (save_total_limit -> ..._to_keep finds nothing; that is what the
    # misnomer table is for), e.g. 'micro_batch' -> ppo_micro_batch_size_per_gpu
    if not close:
        words = [w for w in leaf.split("_") if len(w) > 3]
        close = [n for n in names if any(w in n for w in words)][:3]
    return [f"{parent}.{n}" if parent else n for n in close]


def not_a_key(key: str) -> str:
    return f"'{key}' is not a key of verl's config"


@dataclass(frozen=True)
class KeyProblem:
    """An override that verl's compose would refuse: `key` (full dotted path), `override` (the override's
    own key with its prefix, as the user wrote it), what is wrong, and the nearest valid names."""

    key: str
    override: str
    message: str
    suggestions: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Schema:
    """The composed default config of one verl version, as keys."""

    verl: str
    tree: Tree
    groups: frozenset[str]  # config groups of verl's config tree (`key=option` picks a file there)

    def as_json(self) -> str:
        return json.dumps({"verl": self.verl, "groups": sorted(self.groups), "keys": flat_keys(self.tree)},
                          indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Schema:
        data = json.loads(text)
        return cls(verl=data["verl"], tree=tree_from_flat(data["keys"]), groups=frozenset(data["groups"]))

    def problems(self, overrides: Iterable[tuple[str, Any]]) -> list[KeyProblem]:
        """Every override (prefixed key, Python value; in the order Hydra applies them) that names no key
        of this verl's config, as Hydra would find it."""
        tree = copy.deepcopy(self.tree)
        found: list[KeyProblem] = []
        for raw, value in overrides:
            prefix = raw[:len(raw) - len(raw.lstrip("+~"))]
            key = raw[len(prefix):]
            if key in self.groups or key == "hydra" or key.startswith("hydra."):
                continue
            if prefix == "~":
                if not _delete(tree, key):
                    found.append(KeyProblem(key, raw, not_a_key(key) + " (nothing to delete)", suggest(key, tree)))
            elif prefix == "++":
                _put(tree, key, value)
            elif prefix == "+":
                existing = _node(tree, key)
                if existing is not None and not isinstance(value, (dict, list)):
                    found.append(KeyProblem(key, raw, f"'{key}' is already a key of verl's config: set it without "
                                                      "'+' (Hydra's '+' only adds keys)"))
                else:
                    _put(tree, key, value)
            else:
                missing = _missing(tree, key, value)
                if missing:
                    found.append(KeyProblem(missing, raw, not_a_key(missing), suggest(missing, tree)))
                else:
                    _put(tree, key, value)
        return found


def _missing(tree: Tree, key: str, value: Any) -> str | None:
    """The first key path that `key=value` (no prefix: change existing keys only) names but the tree lacks."""
    node: Any = tree
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return key  # named whole, as Hydra does; suggest() walks up to the deepest parent that exists
        node = node[part]
    if isinstance(value, Mapping) and isinstance(node, dict):
        return _missing_in(node, value, key)  # merged into a struct node: its keys must exist
    return None


def _missing_in(node: Tree, value: Mapping, prefix: str) -> str | None:
    for name, sub in value.items():
        path = f"{prefix}.{name}"
        if name not in node:
            return path
        if isinstance(sub, Mapping) and isinstance(node[name], dict):
            deeper = _missing_in(node[name], sub, path)
            if deeper:
                return deeper
    return None


def _put(tree: Tree, key: str, value: Any) -> None:
    """Set (or merge) a value, creating the parents, as OmegaConf.update(merge=True, force_add=True)."""
    node = tree
    *parents, last = key.split(".")
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    if isinstance(value, Mapping) and isinstance(node.get(last), dict):
        _merge(node[last], value)
    else:
        node[last] = tree_of(value)


def _merge(node: Tree, value: Mapping) -> None:
    for name, sub in value.items():
        name = str(name)
        if isinstance(sub, Mapping) and isinstance(node.get(name), dict):
            _merge(node[name], sub)
        else:
            node[name] = tree_of(sub)


def _delete(tree: Tree, key: str) -> bool:
    node: Any = tree
    *parents, last = key.split(".")
    for part in parents:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    if not isinstance(node, dict) or last not in node:
        return False
    del node[last]
    return True


def snapshot_path(version: str) -> Path:
    return SCHEMA_DIR / f"verl-{version}.json"


@functools.lru_cache(maxsize=None)
def load(version: str) -> Schema | None:
    """The committed snapshot of verl `version`, or None when there is none (a version added without one)."""
    try:
        return Schema.from_json(snapshot_path(version).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None

"""Unknown keys are errors in every block of every recipe and profile, at every nesting level.

Each shipped file is loaded, one misspelled key is put into one block, and loading must fail naming
that key's full path. The blocks are listed here by hand (RECIPE_BLOCKS, PROFILE_BLOCKS); a block that
appears in a shipped file but not in these lists fails the test, so a new block cannot arrive unchecked.
`verl:` blocks are free-form Hydra keys (verl's own schema rejects unknown ones at validation time).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from rlrecipes.errors import RecipeError
from rlrecipes.recipe.load import load_profile, load_recipe

REPO = Path(__file__).resolve().parents[2]
# block path ("" = the top level) -> a minimal valid body, used where a shipped file leaves it out.
RECIPE_BLOCKS = {"": None, "model": None, "dataset": None, "reward": {"mode": "think"},
                 "logging": {"project": "p"}}
PROFILE_BLOCKS = {"": None, "gpu": None, "rollout": None, "micro_batch_per_gpu": {"actor": 1},
                  "offload": {"param": False}}
FREE_FORM = {"verl"}
TYPO = "mdoe"
# expect: blocks (rlrecipes.after.expect; * = a profile or metric name), tested in each file that has them
EXPECT_BLOCKS = ("expect", "expect.accuracy", "expect.accuracy.before", "expect.accuracy.after", "expect.reward",
                 "expect.rollout_agreement", "expect.rollout_agreement.*", "expect.merged_matches_last",
                 "expect.profiles", "expect.profiles.*", "expect.profiles.*.seconds_per_step",
                 "expect.profiles.*.peak_memory_gib", "expect.profiles.*.startup_seconds", "expect.seeds")


def _expect_block(path: str) -> bool:
    return any(re.fullmatch(re.escape(pattern).replace(r"\*", "[^.]+"), path) for pattern in EXPECT_BLOCKS)


def _mapping_paths(data: dict, prefix: str = "") -> set[str]:
    paths = {prefix}
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and key not in FREE_FORM:
            paths |= _mapping_paths(value, path)
    return paths


def _files(kind: str) -> list[Path]:
    root = REPO / "recipes" / ("profiles" if kind == "profile" else "")
    return sorted(root.glob("*.yaml"))


@pytest.mark.parametrize("kind,blocks", [("recipe", RECIPE_BLOCKS), ("profile", PROFILE_BLOCKS)])
def test_every_block_of_the_shipped_files_is_listed(kind, blocks):
    found = set().union(*(_mapping_paths(yaml.safe_load(p.read_text())) for p in _files(kind)))
    found = {path for path in found if not (kind == "recipe" and _expect_block(path))}
    assert found <= set(blocks), f"blocks not covered by this test: {sorted(found - set(blocks))}"


def _cases():
    for kind, blocks in (("recipe", RECIPE_BLOCKS), ("profile", PROFILE_BLOCKS)):
        for path in _files(kind):
            for block in blocks:
                yield pytest.param(kind, path.stem, block, id=f"{kind}:{path.stem}:{block or 'top'}")
            if kind == "recipe":
                for block in sorted(p for p in _mapping_paths(yaml.safe_load(path.read_text())) if _expect_block(p)):
                    yield pytest.param(kind, path.stem, block, id=f"{kind}:{path.stem}:{block}")


@pytest.mark.parametrize("kind,name,block", list(_cases()))
def test_unknown_key_in_any_block_fails_naming_its_path(home, kind, name, block):
    path = home / "recipes" / ("profiles" if kind == "profile" else "") / f"{name}.yaml"
    load = load_profile if kind == "profile" else load_recipe
    load(name)  # the shipped file itself is valid
    data = yaml.safe_load(path.read_text())
    blocks = RECIPE_BLOCKS if kind == "recipe" else PROFILE_BLOCKS
    node = data
    if block not in blocks:  # an expect: block the file has: walk to it
        for part in block.split("."):
            node = node[part]
    elif block:
        node = data.setdefault(block, dict(blocks[block] or {}))
        load_with_block = path.with_name("with-block.yaml")  # the block as filled in is valid too
        load_with_block.write_text(yaml.safe_dump(data))
        load(load_with_block.stem)
        load_with_block.unlink()
    node[TYPO] = "think"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(RecipeError) as info:
        load(name)
    message = str(info.value)
    assert f"unknown key '{TYPO}'" in message
    assert (f"{block}.{TYPO}" if block else TYPO) in message


def test_reward_mode_typo_does_not_fall_back_to_strict(home):
    """The bug this file exists for: `reward: {mdoe: think}` silently trained with the strict reward."""
    path = home / "recipes" / "smoke-ppo.yaml"
    data = yaml.safe_load(path.read_text())
    data["reward"] = {"mdoe": "think"}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(RecipeError, match=r"(?s)reward\.mdoe.*did you mean mode"):
        load_recipe("smoke-ppo")

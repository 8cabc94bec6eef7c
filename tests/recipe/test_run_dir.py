"""The run directory of a profile other than the recipe's own (LOG_DIR/RECIPE/run-PROFILE): a run started again
goes on with it; an unfinished or stale one is rendered again (it is ours); one rendered from other inputs is
refused, naming the difference and how to go on or start over."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rlrecipes.errors import RecipeError
from rlrecipes.recipe.load import resolve
from rlrecipes.recipe.render import ensure_run_dir, launcher_text

REPO = Path(__file__).resolve().parents[2]
RECIPE, PROFILE = "smoke-grpo-lora", "any-1gpu-hopper"


@pytest.fixture
def home(tmp_path, monkeypatch):
    root = tmp_path / "home"
    shutil.copytree(REPO / "recipes", root / "recipes")
    monkeypatch.setenv("RLRECIPES_HOME", str(root))
    monkeypatch.setenv("LOG_DIR", str(tmp_path / "logs"))
    return root


def run_dir(tmp_path) -> Path:
    return tmp_path / "logs" / RECIPE / f"run-{PROFILE}"


def test_a_second_run_reuses_the_run_directory_without_writing(home, tmp_path):
    run = resolve(RECIPE, profile=PROFILE)
    launcher = ensure_run_dir(run, run_dir(tmp_path))
    assert launcher == run_dir(tmp_path) / "train.sh" and launcher.read_text() == launcher_text(run)
    before = {p.name: p.stat().st_mtime_ns for p in run_dir(tmp_path).iterdir()}
    assert ensure_run_dir(resolve(RECIPE, profile=PROFILE), run_dir(tmp_path)) == launcher
    assert {p.name: p.stat().st_mtime_ns for p in run_dir(tmp_path).iterdir()} == before


@pytest.mark.parametrize("damage", ["no-manifest", "edited-launcher", "unreadable-manifest"])
def test_an_unfinished_or_stale_run_directory_is_rendered_again(home, tmp_path, damage):
    run = resolve(RECIPE, profile=PROFILE)
    ensure_run_dir(run, run_dir(tmp_path))
    if damage == "no-manifest":  # a render cut before its last file
        (run_dir(tmp_path) / "manifest.json").unlink()
    elif damage == "edited-launcher":
        (run_dir(tmp_path) / "train.sh").write_text("#!/bin/sh\necho edited\n")
    else:
        (run_dir(tmp_path) / "manifest.json").write_text("{not json")
    ensure_run_dir(run, run_dir(tmp_path))
    assert (run_dir(tmp_path) / "train.sh").read_text() == launcher_text(run)
    assert json.loads((run_dir(tmp_path) / "manifest.json").read_text())["profile"] == PROFILE


def test_a_run_directory_from_other_inputs_is_refused_naming_the_difference(home, tmp_path):
    ensure_run_dir(resolve(RECIPE, profile=PROFILE), run_dir(tmp_path))
    profile = home / "recipes" / "profiles" / f"{PROFILE}.yaml"
    profile.write_text(profile.read_text() + "\n# tuned after an OOM\n")
    kept = (run_dir(tmp_path) / "manifest.json").read_text()
    with pytest.raises(RecipeError) as caught:
        ensure_run_dir(resolve(RECIPE, profile=PROFILE), run_dir(tmp_path))
    text = str(caught.value)
    assert text.startswith(f"{run_dir(tmp_path)}: the run directory was rendered from other inputs: profile_sha256 ")
    assert "recipe_sha256" not in text and f"remove {run_dir(tmp_path)}" in text and "move both aside" in text
    assert (run_dir(tmp_path) / "manifest.json").read_text() == kept

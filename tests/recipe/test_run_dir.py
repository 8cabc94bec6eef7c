"""The run directory of a profile other than the recipe's own (LOG_DIR/RECIPE/run-PROFILE): a run started again
goes on with it; an unfinished or stale one is rendered again (it is ours), as is one whose recipe or profile
changed in nothing it launches; one rendered for another launch is refused, naming the difference and how to go
on or start over."""

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


@pytest.mark.parametrize("damage", ["no-manifest", "edited-launcher", "undecodable-launcher", "unreadable-manifest"])
def test_an_unfinished_or_stale_run_directory_is_rendered_again(home, tmp_path, damage):
    run = resolve(RECIPE, profile=PROFILE)
    ensure_run_dir(run, run_dir(tmp_path))
    if damage == "no-manifest":  # a render cut before its last file
        (run_dir(tmp_path) / "manifest.json").unlink()
    elif damage == "edited-launcher":
        (run_dir(tmp_path) / "train.sh").write_text("#!/bin/sh\necho edited\n")
    elif damage == "undecodable-launcher":
        (run_dir(tmp_path) / "train.sh").write_bytes(b"#!/bin/sh\n\xff\xfe\n")
    else:
        (run_dir(tmp_path) / "manifest.json").write_text("{not json")
    ensure_run_dir(run, run_dir(tmp_path))
    assert (run_dir(tmp_path) / "train.sh").read_text() == launcher_text(run)
    assert json.loads((run_dir(tmp_path) / "manifest.json").read_text())["profile"] == PROFILE


def test_a_run_directory_for_another_launch_is_refused_naming_the_difference(home, tmp_path):
    ensure_run_dir(resolve(RECIPE, profile=PROFILE), run_dir(tmp_path))
    profile = home / "recipes" / "profiles" / f"{PROFILE}.yaml"
    profile.write_text(profile.read_text().replace("gpu_memory_utilization: 0.4", "gpu_memory_utilization: 0.3"))
    kept = {name: (run_dir(tmp_path) / name).read_text() for name in ("manifest.json", "train.sh")}
    with pytest.raises(RecipeError) as caught:
        ensure_run_dir(resolve(RECIPE, profile=PROFILE), run_dir(tmp_path))
    text = str(caught.value)
    assert text.startswith(f"{run_dir(tmp_path)}: the run directory was rendered for another launch: the launch ran "
                           "actor_rollout_ref.rollout.gpu_memory_utilization=0.4 then, "
                           "actor_rollout_ref.rollout.gpu_memory_utilization=0.3 now"), text
    assert "sha256" not in text and f"remove {run_dir(tmp_path)}" in text and "move both aside" in text
    assert {name: (run_dir(tmp_path) / name).read_text() for name in kept} == kept


def test_an_edit_that_leaves_the_launch_as_it_was_goes_on(home, tmp_path):
    """A comment or the contract edited in the recipe and its profile (a `git pull` between two runs, say): the
    launch is the same, so the same command goes on; the manifest is rendered anew with the files' new digests."""
    run = resolve(RECIPE, profile=PROFILE)
    launcher = ensure_run_dir(run, run_dir(tmp_path))
    before = json.loads((run_dir(tmp_path) / "manifest.json").read_text())
    profile = home / "recipes" / "profiles" / f"{PROFILE}.yaml"
    profile.write_text(profile.read_text() + "\n# tuned after an OOM\n")
    recipe = home / "recipes" / f"{RECIPE}.yaml"
    recipe.write_text("# a comment the launch does not run\n" + recipe.read_text())
    again = resolve(RECIPE, profile=PROFILE)
    assert ensure_run_dir(again, run_dir(tmp_path)) == launcher and launcher.read_text() == launcher_text(again)
    after = json.loads((run_dir(tmp_path) / "manifest.json").read_text())
    assert [key for key in before if before[key] != after[key]] == ["recipe_sha256", "profile_sha256"]


def test_a_run_directory_whose_launcher_is_gone_is_judged_by_the_files(home, tmp_path):
    """No launcher left to compare what it ran with: the recipe and profile files' digests decide, as a manifest
    rendered before the launch comparison would be judged."""
    ensure_run_dir(resolve(RECIPE, profile=PROFILE), run_dir(tmp_path))
    (run_dir(tmp_path) / "train.sh").unlink()
    profile = home / "recipes" / "profiles" / f"{PROFILE}.yaml"
    profile.write_text(profile.read_text() + "\n# tuned after an OOM\n")
    with pytest.raises(RecipeError, match=r"rendered for another launch: profile_sha256 '[0-9a-f]{64}' then"):
        ensure_run_dir(resolve(RECIPE, profile=PROFILE), run_dir(tmp_path))

"""The watchdog's free-space floor has one value: the watchdog image's WATCHDOG_MIN_FREE. `rlrecipes
watchdog` reads it when no budget flag is given; compose passes a user's own through instead of restating it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from rlrecipes.errors import RecipeError
from rlrecipes.cli.watchdog import config_from_args, watchdog_arguments

REPO = Path(__file__).resolve().parents[2]


def _config(monkeypatch, tmp_path, argv, floor):
    import argparse

    if floor is None:
        monkeypatch.delenv("WATCHDOG_MIN_FREE", raising=False)
    else:
        monkeypatch.setenv("WATCHDOG_MIN_FREE", floor)
    parser = argparse.ArgumentParser()
    watchdog_arguments(parser)
    return config_from_args(parser.parse_args(["--root", str(tmp_path), *argv]))


@pytest.mark.parametrize("argv, floor, min_free, quota", [
    ([], "20G", 20 * 1024**3, None),         # the image's value
    ([], None, None, None),                  # a bare CLI keeps no floor
    ([], "", None, None),                    # compose passes an unset variable as nothing
    (["--min-free", "1G"], "20G", 1024**3, None),  # the flag wins
    (["--quota", "5G"], "20G", None, 5 * 1024**3),  # a quota replaces the floor
])
def test_floor_from_the_environment(monkeypatch, tmp_path, argv, floor, min_free, quota):
    cfg = _config(monkeypatch, tmp_path, argv, floor)
    assert (cfg.min_free_bytes, cfg.quota_bytes) == (min_free, quota)


def test_a_bad_floor_names_the_variable(monkeypatch, tmp_path):
    with pytest.raises(RecipeError, match="WATCHDOG_MIN_FREE"):
        _config(monkeypatch, tmp_path, [], "lots")


def test_one_value_for_the_floor():
    dockerfile = (REPO / "docker" / "watchdog.Dockerfile").read_text()
    assert len(re.findall(r"WATCHDOG_MIN_FREE=(\S+)", dockerfile)) == 1
    assert "--min-free" not in dockerfile
    service = yaml.safe_load((REPO / "compose.yaml").read_text())["services"]["watchdog"]
    assert "--min-free" not in service["command"]
    assert service["environment"] == ["WATCHDOG_MIN_FREE"]  # passed through, not restated

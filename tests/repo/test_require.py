"""The REQUIRE switches: a tier's missing environment skips, or fails when CI requires the tier."""

from __future__ import annotations

import pytest
from support.require import CI_TIERS, TIERS, skip_or_fail


@pytest.mark.parametrize("tier", sorted(TIERS))
def test_skip_without_the_switch_fail_with_it(tier, monkeypatch):
    monkeypatch.delenv(TIERS[tier], raising=False)
    with pytest.raises(pytest.skip.Exception, match="no such thing"):
        skip_or_fail(tier, "no such thing")
    monkeypatch.setenv(TIERS[tier], "1")
    with pytest.raises(pytest.fail.Exception, match=f"no such thing \\(required because {TIERS[tier]}=1\\)"):
        skip_or_fail(tier, "no such thing")


def test_ci_sets_every_switch():
    from pathlib import Path

    ci = (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text()
    for tier, env in TIERS.items():
        assert (f"export {env}=1" in ci) == (tier in CI_TIERS), env


def _tool(folder, name):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


def test_linter_is_found_beside_the_interpreter_then_on_path(tmp_path, monkeypatch):
    from support.require import linter

    venv_bin, path_bin = tmp_path / "venv" / "bin", tmp_path / "path"
    monkeypatch.setattr("sys.executable", str(venv_bin / "python"))
    monkeypatch.setenv("PATH", str(path_bin))
    on_path = _tool(path_bin, "shellcheck")
    assert linter("shellcheck") == on_path
    beside = _tool(venv_bin, "shellcheck")
    assert linter("shellcheck") == beside


def test_a_missing_linter_fails_under_ci(tmp_path, monkeypatch):
    from support.require import linter

    monkeypatch.setattr("sys.executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("RLRECIPES_REQUIRE_LINT", raising=False)
    with pytest.raises(pytest.skip.Exception, match="hadolint is not installed"):
        linter("hadolint")
    monkeypatch.setenv("RLRECIPES_REQUIRE_LINT", "1")
    with pytest.raises(pytest.fail.Exception, match="required because RLRECIPES_REQUIRE_LINT=1"):
        linter("hadolint")

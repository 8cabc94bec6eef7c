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

    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
    for tier, env in TIERS.items():
        assert (f"export {env}=1" in ci) == (tier in CI_TIERS), env

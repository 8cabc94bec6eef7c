"""The PPO canary's one run on the Hopper stack (docs/bench/gpu-canary.md, "PPO canary on the Hopper stack"),
judged by `rlrecipes expect` as recorded: `make reproduce RECIPE=canary-ppo PROFILE=any-1gpu-hopper SEED=0` on one
H100, cut at step 71 of 100. Its outcome so far meets every learning check, the cut alone makes it MISSED, and
its cost is compared only on the GPU model its figures were measured on (its own)."""

from __future__ import annotations

import json
from pathlib import Path

from support.verdict import by_name, judged

REPO = Path(__file__).resolve().parents[2]
RECORD = REPO / "docs" / "bench" / "gpu-data" / "canary-ppo-hopper-h100"
RUN = RECORD / "logs" / "canary-ppo"
H100 = "NVIDIA H100 80GB HBM3"


def judge(capsys, *extra: str) -> tuple[int, dict]:
    return judged(capsys, RUN, "canary-ppo", *extra)


def checks(result: dict) -> dict[str, tuple[str, str]]:
    return by_name(result["checks"])


def test_the_cut_run_learned_and_is_missed_for_its_steps_alone(capsys):
    code, result = judge(capsys, "--gpu", H100)
    assert (code, result["status"], result["outcome"]["status"]) == (1, "missed", "missed")
    got = checks(result)
    assert got["training steps"] == ("missed", "step 71 of 100")
    assert got["accuracy before training"] == ("met", "0.2207 at step 0 (8 validations)")
    assert got["accuracy after training"] == ("met", "0.4512 at step 70 (8 validations)")
    assert got["accuracy gain"] == ("met", "+0.2305")
    assert got["training reward rises"] == ("met", "+0.2129 (+0.00304 a step over steps 1-71)")
    assert [name for name, (status, _) in got.items() if status == "missed"] == ["training steps"]


def test_its_cost_is_its_own_reference_on_an_h100_and_not_compared_elsewhere(capsys):
    _, result = judge(capsys, "--gpu", H100, "--strict")
    assert result["cost"]["status"] == "met"
    got = checks(result)
    assert got["s/step"] == ("met", f"4.88 s (63 steps), 1.00x the reference 4.88 s on {H100}")
    assert got["peak memory"][0] == "met" and got["peak memory"][1].startswith("2.14 GiB")
    # start-up is read from the gzipped console log kept beside the metrics
    assert got["start-up"] == ("met", f"166 s, 1.00x the reference 166.00 s on {H100}")
    _, result = judge(capsys, "--gpu", "NVIDIA H200")
    assert result["cost"]["status"] == "not measured"
    assert checks(result)["s/step"] == ("not measured", "4.88 s (63 steps)")


def test_the_seeds_it_built_start_inside_the_band():
    # the assets built beside it (seeds 0-2, the stop point 0.15): each held-out start inside 0.10-0.40
    starts = {}
    for seed in (0, 1, 2):
        manifest = json.loads((RECORD / f"manifest-seed-{seed}.json").read_text())
        assert manifest["settings"]["seed"] == seed and manifest["settings"]["stop_at"] == 0.15
        starts[seed] = round(manifest["start"]["accuracy"], 3)
    assert starts == {0: 0.223, 1: 0.18, 2: 0.207}

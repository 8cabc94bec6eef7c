"""The LoRA sync check: verl's rollout-vs-actor metrics judged by rlrecipes.verl.rollout_sync, from literal step tables
and from logs verl itself writes (its calculate_debug_metrics through its file logger and console logger), as
`rlrecipes report` and the smoke run read them. Also the recipe's published reference accuracy in the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlrecipes.cli import main
from rlrecipes.verl.run_metrics import load_run
from rlrecipes.verl.rollout_sync import CORRELATION, DIFF_MAX, DIFF_MEAN, VALID, check_rollout_sync
from rlrecipes.smoke.run import check_rollout_in_sync
from rlrecipes.verl.logs import parse_steps

REPO = Path(__file__).resolve().parents[2]
LOGGER = REPO / "tests" / "fixtures" / "verl_logs" / "rollout_sync_logger.py"


def steps(*rows: tuple) -> dict[int, dict[str, float]]:
    """(step, mean, correlation) rows -> verl's metric dicts (correlation None: 0.5.0 logs none)."""
    out = {}
    for step, mean, corr in rows:
        out[step] = {DIFF_MEAN: mean, DIFF_MAX: 10 * mean, VALID: 1, "critic/score/mean": 0.5}
        if corr is not None:
            out[step][CORRELATION] = corr
    return out


@pytest.mark.parametrize(("name", "table", "status", "said"), [
    ("same weights", steps((1, 1.3e-4, 0.99999), (2, 1.2e-4, 0.99999), (3, 1.7e-4, 0.99998)), "in sync",
     "0.00013 -> 0.00017, correlation min 0.99998"),
    ("correlation falls", steps((1, 0.0, 1.0), (2, 0.006, 0.98), (3, 0.013, 0.85)), "not in sync",
     "step 3: correlation 0.850 < 0.9"),
    ("large gap", steps((1, 0.001, 0.99), (2, 0.06, 0.95)), "not in sync", "step 2: mean |p_rollout - p_actor| 0.06 > 0.05"),
    ("large gap at step 1", steps((1, 0.2, None)), "not in sync", "step 1: mean"),
    ("drift", steps((1, 0.004, None), (2, 0.01, None), (3, 0.02, None)), "not in sync",
     "grew from 0.004 (step 1) to 0.02 (step 3)"),
    ("from exactly zero", steps((1, 0.0, 1.0), (2, 0.021, 0.95)), "not in sync", "grew from 0 (step 1) to 0.021 (step 2)"),
    ("growth below the floor", steps((1, 0.001, None), (2, 0.0039, None)), "in sync", "0.001 -> 0.0039"),
    ("growth below the factor", steps((1, 0.01, 0.99), (2, 0.03, 0.99)), "in sync", "0.01 -> 0.03, correlation min 0.99000"),
    ("one step", steps((4, 0.001, 0.999)), "in sync", "(one step: no update had moved the policy yet)"),
    ("0.5.0: no correlation logged", steps((1, 0.002, None), (2, 0.002, None)), "in sync", "0.002 -> 0.002"),
])
def test_verdicts(name, table, status, said):
    verdict = check_rollout_sync(table)
    assert verdict.status == status, (name, verdict.detail)
    assert said in verdict.detail
    assert verdict.flagged is (status == "not in sync")


def test_invalid_and_missing_rows_are_no_evidence():
    table = steps((1, 0.001, 0.99), (2, 0.9, 0.1))
    table[2][VALID] = 0  # verl: no response tokens in the batch; its values are placeholders
    table[3] = {DIFF_MEAN: float("nan"), CORRELATION: float("nan"), VALID: 1}
    table[4] = {"critic/score/mean": 0.5}
    verdict = check_rollout_sync(table)
    assert verdict.status == "in sync" and verdict.steps == (1,)
    nothing = check_rollout_sync({1: {"critic/score/mean": 0.5}, 2: {}})
    assert nothing.status == "not logged" and not nothing.flagged
    assert "calculate_log_probs" in nothing.detail


# ------------------------------------------------------------------------------ logs written by verl itself
def write_logs(run_in_verl, version: str, mode: str, path: Path, which: str) -> None:
    code = (f"import runpy, sys; sys.argv = ['x', {mode!r}, {str(path)!r}, {which!r}]; "
            f"runpy.run_path({str(LOGGER)!r}, run_name='__main__')")
    proc = run_in_verl(version, code, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    if mode == "console":  # the run's console log is a tee of the trainer's stdout
        path.write_text(proc.stdout)


@pytest.mark.verl
def test_report_flags_a_stale_rollout_from_the_091_file_logger(run_in_verl, tmp_path, capsys):
    runs = {}
    for which in ("synced", "stale"):
        log_dir = tmp_path / which / "qwen2.5-3b-gsm8k-grpo-lora"
        log_dir.mkdir(parents=True)
        write_logs(run_in_verl, "0.9.1", "file", log_dir / "metrics-20261201T000000Z.jsonl", which)
        first = json.loads((log_dir / "metrics-20261201T000000Z.jsonl").read_text().splitlines()[0])
        assert first["step"] == 1 and DIFF_MEAN in first["data"] and CORRELATION in first["data"]
        out = tmp_path / which / "report"
        assert main(["report", str(log_dir), "--out", str(out)]) == 0
        runs[which] = (load_run(log_dir), json.loads((out / "summary.json").read_text()),
                       (out / "report.md").read_text(), capsys.readouterr().out)

    run, summary, md, printed = runs["synced"]
    assert check_rollout_sync(run.steps).status == "in sync"
    assert summary["headline"]["rollout_sync"] == "in sync"
    assert "| Rollout vs actor | in sync: steps 1..6" in md
    assert "NOT IN SYNC" not in md + printed

    run, summary, md, printed = runs["stale"]
    verdict = check_rollout_sync(run.steps)
    assert verdict.flagged and verdict.steps == (1, 2, 3, 4, 5, 6)
    # verl's own numbers for a policy that moved away from the engine's: correlation < 0.9 from step 4
    assert "step 4: correlation 0.813 < 0.9" in verdict.detail
    assert summary["headline"]["rollout_sync"] == "not in sync"
    assert summary["warnings"][0].startswith("ROLLOUT NOT IN SYNC WITH THE ACTOR: ")
    assert "| Rollout vs actor | NOT IN SYNC: " in md
    assert "note: ROLLOUT NOT IN SYNC WITH THE ACTOR" in printed
    # the run directory names the recipe: its published accuracy stands beside the run's
    assert summary["headline"]["reference_accuracy"] == 0.861
    assert "| Published reference | 0.861 -- verl's GSM8K baseline: Qwen2.5-3B-Instruct GRPO + LoRA" in md


@pytest.mark.verl
def test_smoke_check_reads_the_080_console_logger(run_in_verl, tmp_path):
    for which, ok in (("synced", True), ("stale", False)):
        console = tmp_path / f"console-{which}.log"
        write_logs(run_in_verl, "0.8.0", "console", console, which)
        assert "step:6 - training/rollout_probs_diff_valid:1" in console.read_text()
        check = check_rollout_in_sync("smoke-grpo-lora", parse_steps(console.read_text()))
        assert check.name == "rollout in sync with the actor"
        assert check.ok is ok, check.detail
    missing = check_rollout_in_sync("smoke-grpo-lora", {1: {"critic/score/mean": 0.0}})
    assert not missing.ok and "no `training/rollout_probs_diff_mean`" in missing.detail


def test_report_without_a_known_recipe_shows_no_reference(tmp_path):
    log_dir = tmp_path / "my-run"
    log_dir.mkdir()
    (log_dir / "metrics-1.jsonl").write_text(
        '{"step": 1, "data": {"critic/score/mean": 0.1, "val-core/openai/gsm8k/reward/mean@1": 0.5}}\n'
        '{"step": 2, "data": {"critic/score/mean": 0.2, "val-core/openai/gsm8k/reward/mean@1": 0.6}}\n')
    out = tmp_path / "out"
    assert main(["report", str(log_dir), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "Published reference" not in md and "Rollout vs actor" not in md
    assert main(["report", str(log_dir), "--recipe", "qwen2.5-0.5b-gsm8k-ppo", "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "| Published reference | 0.567 -- verl's GSM8K baseline: Qwen2.5-0.5B-Instruct PPO" in md
    assert "this run's best: 0.6000" in md

"""`rlrecipes reproduce`: the stages in order, each through the entry point; a rerun goes on at the stage
that did not finish; the verdict is expect's.

The GPU stages (assets, train, merge, eval) cannot run here: those tests give the command a stand-in entry
point that records its arguments (RLRECIPES_HOME names the repository the command runs the entry point of).
The report and expect stages run for real, through the real entry point, on the canary's GPU logs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlrecipes.cli import build_parser
from rlrecipes.recipe.load import resolve
from rlrecipes.launch.reproduce import REPORTS_DIR_DEFAULT, STATE_FILE, plan_stages

REPO = Path(__file__).resolve().parents[2]
CANARY = REPO / "docs" / "bench" / "gpu-data" / "canary"
BIN = Path(sys.executable).parent

# The stand-in entry point: appends its arguments to $CALLS, exits with $EXIT_<stage> (default 0); the
# train stage (`resume`) waits for a signal when $HANG is set, and says which it got.
FAKE_ENTRYPOINT = r"""#!/usr/bin/env bash
echo "$*" >> "$CALLS"
var="EXIT_${1//-/_}"
if [ "$1" = resume ] && [ -n "${HANG:-}" ]; then
    trap 'echo "got TERM" >> "$CALLS"; exit 0' TERM
    touch "$HANG"
    while :; do sleep 0.1; done
fi
exit "${!var:-0}"
"""


def workspace(tmp_path: Path) -> dict[str, str]:
    root = tmp_path / "ws"
    return {"MODELS_DIR": str(root / "models"), "DATA_DIR": str(root / "data"), "CKPT_DIR": str(root / "ckpt"),
            "LOG_DIR": str(root / "logs"), "REPORTS_DIR": str(root / "reports")}


@pytest.fixture
def fake_home(tmp_path):
    home = tmp_path / "home"
    (home / "scripts").mkdir(parents=True)
    (home / "recipes").symlink_to(REPO / "recipes")
    (home / "scripts" / "entrypoint.sh").write_text(FAKE_ENTRYPOINT)
    return home


def reproduce(tmp_path, home, *args, env=None, wait=True):
    full = {"PATH": f"{BIN}:/usr/bin:/bin", "PYTHONPATH": str(REPO), "RLRECIPES_HOME": str(home),
            "CALLS": str(tmp_path / "calls"), **workspace(tmp_path), **(env or {})}
    argv = [sys.executable, "-m", "rlrecipes", "reproduce", *args]
    if not wait:
        return subprocess.Popen(argv, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(argv, env=full, capture_output=True, text=True, timeout=120)


def calls(tmp_path) -> list[str]:
    path = tmp_path / "calls"
    lines = path.read_text().splitlines() if path.exists() else []
    path.unlink(missing_ok=True)
    return [line.split()[0] if line.split() else line for line in lines]


def state(tmp_path, recipe) -> dict:
    return json.loads((Path(workspace(tmp_path)["LOG_DIR"]) / recipe / STATE_FILE).read_text())


def test_the_stages_of_an_offline_recipe_and_of_a_hub_recipe(monkeypatch, tmp_path):
    for key, value in workspace(tmp_path).items():
        monkeypatch.setenv(key, value)
    ws = workspace(tmp_path)
    canary = plan_stages(resolve("canary-grpo-lora"), [], Path(ws["REPORTS_DIR"]))
    assert [s.name for s in canary] == ["assets", "train", "merge", "eval", "report", "expect"]
    assert canary[0].argv == ("canary-assets", "--models-dir", ws["MODELS_DIR"], "--data-dir", ws["DATA_DIR"])
    merged = f"{ws['MODELS_DIR']}/canary-grpo-lora-merged"
    assert canary[2].argv[:2] == ("merge", f"{ws['CKPT_DIR']}/canary-grpo-lora") and "--force" in canary[2].argv
    # the canary's task is not the hub's GSM8K: no lm-eval; answers as long as the rollout's (64 tokens)
    assert canary[3].argv == ("eval", merged, "--out", f"{merged}/eval", "--max-new-tokens", "64", "--skip-lm-eval")
    assert canary[5].verdicts == (0, 1) and all(s.verdicts == (0,) for s in canary[:5])
    assert ("--profile", "any-1gpu") == canary[5].argv[4:6]

    hub = plan_stages(resolve("qwen2.5-3b-gsm8k-grpo-lora", overrides=["trainer.total_epochs=1"]),
                      ["trainer.total_epochs=1"], Path(REPORTS_DIR_DEFAULT))
    assert [s.name for s in hub] == ["data", "model", "train", "merge", "eval", "report", "expect"]
    assert hub[2].argv == ("resume", "trainer.total_epochs=1")
    assert "--skip-lm-eval" not in hub[4].argv and hub[4].argv[-1] == "512"  # 1024-token rollout, eval's 512
    assert hub[5].argv[2:4] == ("--out", f"{REPORTS_DIR_DEFAULT}/qwen2.5-3b-gsm8k-grpo-lora")


@pytest.mark.parametrize("recipe", ["canary-ppo", "qwen2.5-0.5b-gsm8k-ppo"])
def test_every_stage_is_a_stage_the_entry_point_runs_with_arguments_its_command_accepts(monkeypatch, tmp_path,
                                                                                          recipe):
    for key, value in workspace(tmp_path).items():
        monkeypatch.setenv(key, value)
    entrypoint = (REPO / "scripts" / "entrypoint.sh").read_text()
    parser = build_parser(full=True)
    for stage in plan_stages(resolve(recipe), [], Path("/r")):
        command, *rest = stage.argv
        if command in ("data", "model", "resume"):  # the entry point's own stages, driven by RECIPE/PROFILE
            assert f"\n        {command}) " in entrypoint
            continue
        parser.parse_args([command, *rest])  # exits 2 on an argument the command does not take


def test_a_rerun_goes_on_at_the_stage_that_failed_and_the_verdict_is_expects(tmp_path, fake_home):
    failed = reproduce(tmp_path, fake_home, "canary-ppo", env={"EXIT_eval": "7"})
    assert failed.returncode == 7, failed.stderr
    assert calls(tmp_path) == ["canary-assets", "resume", "merge", "eval"]
    assert "eval failed (exit 7)" in failed.stderr and "go on from eval" in failed.stderr
    stages = state(tmp_path, "canary-ppo")["stages"]
    assert [stages[s]["status"] for s in ("assets", "train", "merge", "eval")] == ["done"] * 3 + ["failed"]
    assert "report" not in stages

    missed = reproduce(tmp_path, fake_home, "canary-ppo", env={"EXIT_expect": "1"})
    assert missed.returncode == 1, missed.stderr
    assert calls(tmp_path) == ["eval", "report", "expect"]  # finished stages are not redone
    assert "expected result MISSED" in missed.stdout and "assets: done before" in missed.stdout

    again = reproduce(tmp_path, fake_home, "canary-ppo")
    assert again.returncode == 1 and calls(tmp_path) == []  # the stored verdict, nothing run

    fresh = reproduce(tmp_path, fake_home, "canary-ppo", "--restart")
    assert fresh.returncode == 0, fresh.stderr
    assert calls(tmp_path) == ["canary-assets", "resume", "merge", "eval", "report", "expect"]


def test_a_rerun_as_another_run_is_refused_and_changes_nothing(tmp_path, fake_home):
    assert reproduce(tmp_path, fake_home, "canary-ppo", env={"EXIT_merge": "1"}).returncode == 1
    calls(tmp_path)
    before = state(tmp_path, "canary-ppo")
    for args in (["--profile", "any-1gpu-vllm"], ["trainer.total_training_steps=5"]):
        other = reproduce(tmp_path, fake_home, "canary-ppo", *args)
        assert other.returncode == 2
        assert STATE_FILE in other.stderr and "--restart" in other.stderr
        assert calls(tmp_path) == [] and state(tmp_path, "canary-ppo") == before


def test_an_unreadable_state_is_refused_not_overwritten(tmp_path, fake_home):
    path = Path(workspace(tmp_path)["LOG_DIR"]) / "canary-ppo" / STATE_FILE
    path.parent.mkdir(parents=True)
    path.write_text('{"version": 1, "stag')
    done = reproduce(tmp_path, fake_home, "canary-ppo")
    assert done.returncode == 2 and "unreadable state" in done.stderr and str(path) in done.stderr
    assert path.read_text() == '{"version": 1, "stag' and calls(tmp_path) == []


def test_a_stop_reaches_the_training_stage_and_a_rerun_trains_again(tmp_path, fake_home):
    """docker stop sends TERM to the stage runner: it must reach the trainer (its stop guard saves first), and
    a stage stopped that way is not finished even when it exits 0."""
    hang = tmp_path / "training"
    proc = reproduce(tmp_path, fake_home, "canary-ppo", env={"HANG": str(hang)}, wait=False)
    deadline = time.monotonic() + 60
    while not hang.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert calls(tmp_path) == ["canary-assets", "resume", "got"]
    assert state(tmp_path, "canary-ppo")["stages"]["train"] == {**state(tmp_path, "canary-ppo")["stages"]["train"],
                                                                 "status": "failed", "exit": 143}
    resumed = reproduce(tmp_path, fake_home, "canary-ppo")
    assert resumed.returncode == 0 and calls(tmp_path) == ["resume", "merge", "eval", "report", "expect"]


@pytest.mark.parametrize("run, code, verdict", [("ppo1e5", 0, "met"), ("shuf3e4", 1, "MISSED")])
def test_report_and_expect_run_through_the_real_entry_point_on_real_canary_logs(tmp_path, run, code, verdict):
    """The stages after training, for real: the report and the verdict of the canary's GPU run (met) and of
    its shuffled-reward control (missed), with the stages before them recorded as done."""
    recipe = "canary-grpo-lora" if run.startswith("shuf") else "canary-ppo"
    ws = workspace(tmp_path)
    logs = Path(ws["LOG_DIR"]) / recipe
    evaluated = Path(ws["MODELS_DIR"]) / f"{recipe}-merged" / "eval"
    logs.mkdir(parents=True)
    evaluated.mkdir(parents=True)
    for log in (CANARY / run).glob("console-*.log"):
        shutil.copy(log, logs)
    shutil.copy(CANARY / run / "eval-summary.json", evaluated)
    identity = {"recipe": recipe, "profile": "any-1gpu", "overrides": []}
    done = {"status": "done", "exit": 0, "seconds": 1.0}
    (logs / STATE_FILE).write_text(json.dumps({"version": 1, "identity": identity,
                                               "stages": {s: done for s in ("assets", "train", "merge", "eval")}}))
    result = reproduce(tmp_path, REPO, recipe)
    assert result.returncode == code, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"expected result {verdict}" in result.stdout
    judged = json.loads((logs / "expect.json").read_text())
    assert judged["status"] == verdict.lower() and judged["recipe"] == recipe
    report = Path(ws["REPORTS_DIR"]) / recipe
    assert (report / "report.html").is_file() and (report / "summary.json").is_file()
    assert set(state(tmp_path, recipe)["stages"]) == {"assets", "train", "merge", "eval", "report", "expect"}


def test_make_reproduce_fails_fast_without_a_gpu():
    if shutil.which("nvidia-smi"):
        pytest.skip("this host has nvidia-smi")
    done = subprocess.run(["make", "-s", "reproduce", "RECIPE=canary-ppo"], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PATH": "/usr/bin:/bin"})
    assert done.returncode != 0 and "`make reproduce` needs a host with an NVIDIA GPU" in done.stderr


def test_without_an_entry_point_nothing_runs_or_is_written(tmp_path):
    home = tmp_path / "bare"
    (home / "recipes").mkdir(parents=True)
    shutil.copy(REPO / "recipes" / "canary-ppo.yaml", home / "recipes")
    shutil.copytree(REPO / "recipes" / "profiles", home / "recipes" / "profiles")
    done = reproduce(tmp_path, home, "canary-ppo")
    assert done.returncode == 3 and "no entry point" in done.stderr and str(home / "scripts") in done.stderr
    assert not Path(workspace(tmp_path)["LOG_DIR"]).exists()

"""`rlrecipes reproduce`: the stages in order, each an rlrecipes command run as a process of its own; a rerun
goes on at the stage that did not finish; a stop is recorded as `interrupted` with the last whole checkpoint;
the verdict is expect's.

The GPU stages (assets, train, merge, eval) cannot run here: those tests run the command in this process with
`run_stage` replaced by a recorder that returns scripted outcomes (the stages' own recovery is
tests/launch/test_stages.py and the recovery matrix). The report and expect stages run for real on the canary's
GPU logs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rlrecipes.cli import build_parser, main
from rlrecipes.launch import reproduce as engine
from rlrecipes.process import Ended
from rlrecipes.launch.reproduce import REPORTS_DIR_DEFAULT, STATE_FILE, plan_stages
from rlrecipes.errors import RecipeError
from rlrecipes.recipe.load import resolve

REPO = Path(__file__).resolve().parents[2]
CANARY = REPO / "docs" / "bench" / "gpu-data" / "canary"
FIXTURES = REPO / "tests" / "fixtures"
BIN = Path(sys.executable).parent


def workspace(tmp_path: Path) -> dict[str, str]:
    root = tmp_path / "ws"
    return {"MODELS_DIR": str(root / "models"), "DATA_DIR": str(root / "data"), "CKPT_DIR": str(root / "ckpt"),
            "LOG_DIR": str(root / "logs"), "CACHE_DIR": str(root / "cache"), "REPORTS_DIR": str(root / "reports")}


@pytest.fixture
def gpu_host(monkeypatch, tmp_path):
    """This process as a one-H200 host (the stand-in nvidia-smi) with its own workspace."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").symlink_to(FIXTURES / "gpuhost" / "nvidia-smi")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("RLRECIPES_STANDIN_INVENTORY", str(FIXTURES / "inventories" / "h200-x1.json"))
    for key, value in workspace(tmp_path).items():
        monkeypatch.setenv(key, value)


class Stages:
    """Stands in for run_stage: records each stage's name, answers with EXIT[name] (0 by default) or a stop."""

    def __init__(self, monkeypatch, exits: dict[str, int] | None = None, stop: dict[str, int] | None = None):
        self.calls: list[str] = []
        self.argv: dict[str, tuple[str, ...]] = {}
        self.exits, self.stop = exits or {}, stop or {}
        monkeypatch.setattr("rlrecipes.cli.reproduce.run_stage", self)

    def __call__(self, stage, env):
        self.calls.append(stage.name)
        if stage.name in ("report", "expect"):  # the stand-in one-H200 host's GPU model, for the cost references
            assert stage.argv[-2:] == ("--gpu", "NVIDIA H200")
        self.argv[stage.name] = stage.argv
        assert env["RECIPE"] and env["LOG_DIR"] == os.environ["LOG_DIR"]
        if stage.name in self.stop:
            return Ended(128 + self.stop[stage.name], self.stop[stage.name])
        return Ended(self.exits.get(stage.name, 0), None)

    def take(self) -> list[str]:
        calls, self.calls = self.calls, []
        return calls


def state(tmp_path, recipe) -> dict:
    return json.loads((Path(workspace(tmp_path)["LOG_DIR"]) / recipe / STATE_FILE).read_text())


def test_the_stages_of_an_offline_recipe_and_of_a_hub_recipe(monkeypatch, tmp_path):
    for key, value in workspace(tmp_path).items():
        monkeypatch.setenv(key, value)
    ws = workspace(tmp_path)
    canary = plan_stages(resolve("canary-grpo-lora"), [], Path(ws["REPORTS_DIR"]))
    assert [s.name for s in canary] == ["assets", "train", "merge", "eval", "report", "expect"]
    assert canary[0].argv == ("canary-assets", "--models-dir", ws["MODELS_DIR"], "--data-dir", ws["DATA_DIR"])
    engine_argv = ("stage", "--recipe", "canary-grpo-lora", "--profile", "any-1gpu")
    assert canary[1].argv == (*engine_argv, "resume", "--")
    merged = f"{ws['MODELS_DIR']}/canary-grpo-lora-merged"
    assert canary[2].argv[:2] == ("merge", f"{ws['CKPT_DIR']}/canary-grpo-lora") and "--force" in canary[2].argv
    # the canary's task is not the hub's GSM8K: no lm-eval; answers as long as the rollout's (64 tokens)
    assert canary[3].argv == (*engine_argv, "eval", "--", merged, "--out", f"{merged}/eval", "--max-new-tokens",
                              "64", "--skip-lm-eval")
    assert canary[5].verdicts == (0, 1) and all(s.verdicts == (0,) for s in canary[:5])
    assert ("--profile", "any-1gpu") == canary[5].argv[4:6]
    assert [s.name for s in canary if s.gpu] == ["assets", "train", "eval"]
    # no GPU model known: the report and expect show the cost without comparing it
    assert "--gpu" not in canary[4].argv and "--gpu" not in canary[5].argv
    on_h200 = plan_stages(resolve("canary-grpo-lora"), [], Path(ws["REPORTS_DIR"]), gpu="NVIDIA H200")
    assert on_h200[4].argv[-2:] == on_h200[5].argv[-2:] == ("--gpu", "NVIDIA H200")
    assert canary[0].command() == [sys.executable, "-m", "rlrecipes", *canary[0].argv]

    hub = plan_stages(resolve("qwen2.5-3b-gsm8k-grpo-lora", overrides=["trainer.total_epochs=1"]),
                      ["trainer.total_epochs=1"], Path(REPORTS_DIR_DEFAULT))
    assert [s.name for s in hub] == ["data", "model", "train", "merge", "eval", "report", "expect"]
    assert hub[0].argv[-1] == "data" and hub[1].argv[-1] == "model"
    assert hub[2].argv[-3:] == ("resume", "--", "trainer.total_epochs=1")
    assert "--skip-lm-eval" not in hub[4].argv and hub[4].argv[-1] == "512"  # 1024-token rollout, eval's 512
    assert hub[5].argv[2:4] == ("--out", f"{REPORTS_DIR_DEFAULT}/qwen2.5-3b-gsm8k-grpo-lora")


@pytest.mark.parametrize("recipe", ["canary-ppo", "qwen2.5-0.5b-gsm8k-ppo"])
def test_every_stage_is_a_command_line_its_command_accepts(monkeypatch, tmp_path, recipe):
    from rlrecipes.cli import _command_parser

    for key, value in workspace(tmp_path).items():
        monkeypatch.setenv(key, value)
    parser = build_parser(full=True)
    for stage in plan_stages(resolve(recipe), [], Path("/r")):
        command, *rest = stage.argv
        parser.parse_args([command, *rest])  # exits 2 on an argument the command does not take
        if command == "stage":  # and the engine's stage gets what follows --, whole
            args = _command_parser("stage")[0].parse_intermixed_args(rest)
            assert args.recipe == recipe and args.stage in ("data", "model", "resume", "eval")


def test_a_rerun_goes_on_at_the_stage_that_failed_and_the_verdict_is_expects(gpu_host, monkeypatch, tmp_path, capsys):
    stages = Stages(monkeypatch, exits={"eval": 7})
    assert main(["reproduce", "canary-ppo"]) == 7
    assert stages.take() == ["assets", "train", "merge", "eval"]
    err = capsys.readouterr().err
    assert "eval failed (exit 7)" in err and "go on from eval" in err
    recorded = state(tmp_path, "canary-ppo")["stages"]
    assert [recorded[s]["status"] for s in ("assets", "train", "merge", "eval")] == ["done"] * 3 + ["failed"]
    assert "report" not in recorded

    stages.exits = {"expect": 1}
    assert main(["reproduce", "canary-ppo"]) == 1
    assert stages.take() == ["eval", "report", "expect"]  # finished stages are not redone
    out = capsys.readouterr().out
    assert "expected result MISSED" in out and "assets: done before" in out

    assert main(["reproduce", "canary-ppo"]) == 1 and stages.take() == []  # the stored verdict, nothing run

    stages.exits = {}
    assert main(["reproduce", "canary-ppo", "--restart"]) == 0
    assert stages.take() == ["assets", "train", "merge", "eval", "report", "expect"]


def test_a_rerun_as_another_run_is_refused_and_changes_nothing(gpu_host, monkeypatch, tmp_path, capsys):
    stages = Stages(monkeypatch, exits={"merge": 1})
    assert main(["reproduce", "canary-ppo"]) == 1
    stages.take()
    before = state(tmp_path, "canary-ppo")
    for args in (["--profile", "any-1gpu-vllm"], ["trainer.total_training_steps=5"]):
        assert main(["reproduce", "canary-ppo", *args]) == 2
        err = capsys.readouterr().err
        assert STATE_FILE in err and "--restart" in err
        assert stages.take() == [] and state(tmp_path, "canary-ppo") == before


def test_an_unreadable_state_is_refused_not_overwritten(gpu_host, monkeypatch, tmp_path, capsys):
    stages = Stages(monkeypatch)
    path = Path(workspace(tmp_path)["LOG_DIR"]) / "canary-ppo" / STATE_FILE
    path.parent.mkdir(parents=True)
    path.write_text('{"version": 1, "stag')
    assert main(["reproduce", "canary-ppo"]) == 2
    err = capsys.readouterr().err
    assert "unreadable state" in err and str(path) in err
    assert path.read_text() == '{"version": 1, "stag' and stages.take() == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stop_is_recorded_as_interrupted_with_the_last_whole_checkpoint(gpu_host, monkeypatch, tmp_path, capsys,
                                                                          sig):
    ckpt = Path(workspace(tmp_path)["CKPT_DIR"]) / "canary-ppo"
    (ckpt / "global_step_30").mkdir(parents=True)
    (ckpt / "global_step_40").mkdir()  # a save cut short: not named by the tracker
    (ckpt / "latest_checkpointed_iteration.txt").write_text("30")
    stages = Stages(monkeypatch, stop={"train": sig})
    assert main(["reproduce", "canary-ppo"]) == 128 + sig
    assert stages.take() == ["assets", "train"]
    train = state(tmp_path, "canary-ppo")["stages"]["train"]
    assert (train["status"], train["exit"], train["checkpoint"]) == ("interrupted", 128 + sig, 30)
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"[reproduce] train stopped by {sig.name} (exit {128 + sig}) after ")
    assert err[-1].endswith(f"the same command goes on at train, training from the checkpoint of step 30 ({ckpt}) "
                            "(the stages before it are kept)")
    stages.stop = {}
    assert main(["reproduce", "canary-ppo"]) == 0
    assert stages.take() == ["train", "merge", "eval", "report", "expect"]


def test_a_stop_between_two_stages_is_said_and_recorded_as_one_within_a_stage(gpu_host, monkeypatch, tmp_path,
                                                                           capsys):
    """The stop lands after reproduce recorded merge as running and before merge's process exists (the recovery
    matrix caught this once: reproduce died of the default action, saying nothing)."""
    calls, spawned = [], []
    real_record = engine.Run.record

    def record(self, stage, status, **fields):
        real_record(self, stage, status, **fields)
        if (stage.name, status) == ("merge", "running"):
            os.kill(os.getpid(), signal.SIGTERM)

    def run_stage(stage, env):  # the stages before merge stand in; merge is started the real way
        calls.append(stage.name)
        return engine.run_stage(stage, env) if stage.name == "merge" else Ended(0, None)

    monkeypatch.setattr(engine.Run, "record", record)
    monkeypatch.setattr("rlrecipes.cli.reproduce.run_stage", run_stage)
    monkeypatch.setattr("rlrecipes.process.spawn", lambda argv, *a, **k: spawned.append(argv))
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        assert main(["reproduce", "canary-ppo"]) == 143
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    assert calls == ["assets", "train", "merge"] and spawned == []
    merge = state(tmp_path, "canary-ppo")["stages"]["merge"]
    assert (merge["status"], merge["exit"]) == ("interrupted", 143)
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("[reproduce] merge stopped by SIGTERM (exit 143) after ")
    assert "the same command goes on at merge" in err[-1]


def test_a_cpu_host_is_refused_before_any_stage(monkeypatch, tmp_path, capsys):
    for key, value in workspace(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    stages = Stages(monkeypatch)
    assert main(["reproduce", "canary-ppo"]) == 3
    assert "needs a host with an NVIDIA GPU" in capsys.readouterr().err
    assert stages.take() == [] and not Path(workspace(tmp_path)["LOG_DIR"]).exists()


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
    standin = tmp_path / "bin"  # a one-H200 host: its GPU model weighs the cost in the report and the verdict
    standin.mkdir()
    (standin / "nvidia-smi").symlink_to(FIXTURES / "gpuhost" / "nvidia-smi")
    env = {"PATH": f"{standin}:{BIN}:/usr/bin:/bin", "PYTHONPATH": str(REPO), **ws,
           "RLRECIPES_STANDIN_INVENTORY": str(FIXTURES / "inventories" / "h200-x1.json")}
    result = subprocess.run([sys.executable, "-m", "rlrecipes", "reproduce", recipe], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == code, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"expected result {verdict}" in result.stdout
    judged = json.loads((logs / "expect.json").read_text())
    assert judged["status"] == verdict.lower() and judged["recipe"] == recipe and judged["gpu"] == "NVIDIA H200"
    report = Path(ws["REPORTS_DIR"]) / recipe
    assert (report / "report.html").is_file() and (report / "summary.json").is_file()
    # the report's contract table is expect's verdict, the cost weighed against the same GPU model
    assert json.loads((report / "summary.json").read_text())["expect"] == judged
    assert set(state(tmp_path, recipe)["stages"]) == {"assets", "train", "merge", "eval", "report", "expect"}


def test_make_reproduce_fails_fast_without_a_gpu():
    if shutil.which("nvidia-smi"):
        pytest.skip("this host has nvidia-smi")
    done = subprocess.run(["make", "-s", "reproduce", "RECIPE=canary-ppo"], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PATH": "/usr/bin:/bin"})
    assert done.returncode != 0 and "`make reproduce` needs a host with an NVIDIA GPU" in done.stderr


def test_a_seed_builds_its_assets_from_it_and_keeps_to_folders_of_its_own(monkeypatch, tmp_path):
    ws = workspace(tmp_path)
    seeded = engine.seeded_environ(ws, 3)
    assert {k: seeded[k] for k in engine.SEEDED_DIRS} == {k: f"{ws[k]}/seed-3" for k in engine.SEEDED_DIRS}
    assert seeded["CACHE_DIR"] == ws["CACHE_DIR"]  # compile caches only: shared by the seeds
    assert engine.seeded_environ({}, 0)["CKPT_DIR"] == "/workspace/checkpoints/seed-0"  # unset: the default's
    run = resolve("canary-grpo-lora", env=seeded)
    assert run.ckpt_dir == Path(ws["CKPT_DIR"]) / "seed-3" / "canary-grpo-lora"
    assets = plan_stages(run, [], Path(seeded["REPORTS_DIR"]), seed=3)[0]
    assert assets.argv == ("canary-assets", "--models-dir", f"{ws['MODELS_DIR']}/seed-3",
                           "--data-dir", f"{ws['DATA_DIR']}/seed-3", "--seed", "3")
    assert "--seed" not in plan_stages(run, [], Path("/r"))[0].argv  # no seed given: the builder's own
    smoke = plan_stages(resolve("smoke-ppo", env=seeded), [], Path("/r"), seed=0)[0]
    assert smoke.argv[0] == "smoke-assets" and smoke.argv[-2:] == ("--seed", "0")
    for key, value in ws.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(RecipeError, match=r"--seed 3: qwen2.5-3b-gsm8k-grpo-lora's model and data are not built"):
        plan_stages(resolve("qwen2.5-3b-gsm8k-grpo-lora"), [], Path("/r"), seed=3)


def test_seeded_runs_keep_apart_and_each_goes_on_where_it_stopped(gpu_host, monkeypatch, tmp_path, capsys):
    ws = workspace(tmp_path)
    seen: list[tuple[str, str, tuple[str, ...]]] = []
    exits: dict[str, int] = {"merge": 1}

    def run_stage(stage, env):
        seen.append((stage.name, env["LOG_DIR"], stage.argv))
        return Ended(exits.get(stage.name, 0), None)

    monkeypatch.setattr("rlrecipes.cli.reproduce.run_stage", run_stage)
    assert main(["reproduce", "canary-ppo", "--seed", "3"]) == 1  # merge fails
    assert [name for name, _, _ in seen] == ["assets", "train", "merge"]
    assert {log_dir for _, log_dir, _ in seen} == {f"{ws['LOG_DIR']}/seed-3"}
    assert seen[0][2][-2:] == ("--seed", "3")
    seeded_state = Path(ws["LOG_DIR"]) / "seed-3" / "canary-ppo" / STATE_FILE
    assert json.loads(seeded_state.read_text())["identity"]["seed"] == 3
    assert not (Path(ws["LOG_DIR"]) / "canary-ppo").exists()  # the unseeded run's folders untouched

    seen.clear()
    exits.clear()
    assert main(["reproduce", "canary-ppo", "--seed", "4"]) == 0  # another seed: a run of its own, from nothing
    assert [name for name, _, _ in seen] == ["assets", "train", "merge", "eval", "report", "expect"]
    report = dict((name, argv) for name, _, argv in seen)["report"]
    assert report[report.index("--out") + 1] == f"{ws['REPORTS_DIR']}/seed-4/canary-ppo"
    assert "canary-ppo on any-1gpu (seed 4): expected result met" in capsys.readouterr().out

    seen.clear()
    assert main(["reproduce", "canary-ppo", "--seed", "3"]) == 0  # seed 3 goes on at its merge
    assert [name for name, _, _ in seen] == ["merge", "eval", "report", "expect"]
    seen.clear()
    assert main(["reproduce", "canary-ppo"]) == 0  # and no seed is the usual folders, untouched by either
    assert [name for name, _, _ in seen][0] == "assets" and seen[0][1] == ws["LOG_DIR"]
    assert "--seed" not in seen[0][2] and "seed" not in state(tmp_path, "canary-ppo")["identity"]


def test_make_reproduce_passes_the_seed():
    done = subprocess.run(["make", "-n", "--no-print-directory", "reproduce", "RECIPE=canary-ppo", "SEED=7",
                           "ARGS=trainer.total_training_steps=5"], cwd=REPO, capture_output=True, text=True, timeout=60)
    line = [x for x in done.stdout.splitlines() if "in-image.sh reproduce" in x]
    assert line and line[0].endswith("reproduce canary-ppo  --seed 7 trainer.total_training_steps=5"), done.stdout
    assert "--seed" not in subprocess.run(["make", "-n", "--no-print-directory", "reproduce", "RECIPE=canary-ppo"],
                                          cwd=REPO, capture_output=True, text=True, timeout=60).stdout


@pytest.mark.parametrize("seed, message", [("-1", "a seed is >= 0, got -1"), ("abc", "not a whole number: 'abc'"),
                                           ("", "not a whole number: ''")])
def test_a_seed_that_names_no_folder_is_refused(gpu_host, monkeypatch, tmp_path, capsys, seed, message):
    stages = Stages(monkeypatch)
    with pytest.raises(SystemExit) as exc:
        main(["reproduce", "canary-ppo", "--seed", seed])
    assert exc.value.code == 2 and message in capsys.readouterr().err
    assert stages.take() == [] and not Path(workspace(tmp_path)["LOG_DIR"]).exists()

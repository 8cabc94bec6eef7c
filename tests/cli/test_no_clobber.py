"""No command writes over its own input (issue 38): an --out that is an input, or a folder holding one, is
refused with exit 2 and one line before anything is written; the layouts `rlrecipes reproduce` uses still
work; and an interrupted report leaves the previous report set or none."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rlrecipes.cli import main

REPO = Path(__file__).resolve().parents[2]
GRPO = "qwen2.5-3b-gsm8k-grpo-lora"
GOOD_LOGS = REPO / "tests" / "fixtures" / "expect" / "good" / GRPO
LM_EVAL = REPO / "tests" / "fixtures" / "lm_eval"
METRICS = "metrics-20261201T000000Z.jsonl"


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under `root` (itself included) with its bytes (None for a folder)."""
    paths = [root, *root.rglob("*")] if root.is_dir() else [root]
    return {str(p): (None if p.is_dir() else p.read_bytes()) for p in paths}


def refused(capsys, argv: list[str], *words: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


@pytest.fixture
def logs(tmp_path) -> Path:
    """A run's log folder, LOG_DIR/<recipe>, with one verl metrics log."""
    run = tmp_path / "logs" / GRPO
    shutil.copytree(GOOD_LOGS, run)
    return run


@pytest.fixture
def evaluated(tmp_path) -> Path:
    """MERGED/eval as `rlrecipes eval` leaves it (an eval-summary.json from the stored lm-eval results)."""
    merged = tmp_path / "models" / f"{GRPO}-merged"
    merged.mkdir(parents=True)
    (merged / "config.json").write_text("{}")
    assert main(["eval", str(LM_EVAL / "trained"), "--baseline", str(LM_EVAL / "baseline"), "--from-results",
                 "--out", str(merged / "eval")]) == 0
    return merged / "eval"


# --------------------------------------------------------------------------------------------- expect
EXPECT = ["--recipe", GRPO, "--profile", "a100-80gb"]


@pytest.mark.parametrize(("form", "what"), [
    ("the log", "the metrics log"),
    ("the log folder", "the run's log directory"),
    ("the folder above it", "the run's log directory"),
])
def test_expect_out_over_its_log_is_refused(tmp_path, capsys, logs, form, what):
    """`expect --out D/metrics-<stamp>.jsonl` replaced the run's metrics log with the verdict."""
    out = {"the log": logs / METRICS, "the log folder": logs, "the folder above it": logs.parent}[form]
    before = snapshot(tmp_path)
    refused(capsys, ["expect", "--log", str(logs / METRICS), *EXPECT, "--out", str(out)], "--out", str(out),
            f"the metrics log {logs / METRICS}")
    assert snapshot(tmp_path) == before
    refused(capsys, ["expect", str(logs), *EXPECT, "--out", str(out)], "--out", str(out), what)
    assert snapshot(tmp_path) == before


def test_expect_out_named_like_a_log_of_the_run_is_refused(tmp_path, capsys, logs):
    """A new metrics-*.jsonl in the run's folder would be read as one of its launches by the next expect."""
    before = snapshot(tmp_path)
    refused(capsys, ["expect", str(logs), *EXPECT, "--out", str(logs / "metrics-20261202T000000Z.jsonl")],
            "--out", "the run's log directory")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("form", ["file", "folder"])
def test_expect_out_over_the_eval_summary_is_refused(tmp_path, capsys, logs, evaluated, form):
    out = evaluated / "eval-summary.json" if form == "file" else evaluated
    before = snapshot(tmp_path)
    refused(capsys, ["expect", str(logs), *EXPECT, "--eval", str(evaluated), "--out", str(out)],
            "--out", "the eval summary")
    assert snapshot(tmp_path) == before


def test_expect_out_over_the_recipe_is_refused(tmp_path, capsys, logs, monkeypatch):
    home = tmp_path / "repo"
    shutil.copytree(REPO / "recipes", home / "recipes", ignore=shutil.ignore_patterns("*.sh"))
    monkeypatch.setenv("RLRECIPES_HOME", str(home))
    before = snapshot(tmp_path)
    refused(capsys, ["expect", str(logs), *EXPECT, "--out", str(home / "recipes" / f"{GRPO}.yaml")],
            "--out", "the recipe")
    refused(capsys, ["expect", str(logs), *EXPECT, "--out", str(home / "recipes" / "profiles" / "a100-80gb.yaml")],
            "--out", "the profile")
    assert snapshot(tmp_path) == before


def test_expect_json_in_the_log_folder_is_allowed_and_never_read_as_a_log(capsys, logs, evaluated):
    """reproduce's layout: `expect LOGDIR ... --eval MERGED/eval --out LOGDIR/expect.json`, run again."""
    argv = ["expect", str(logs), *EXPECT, "--eval", str(evaluated), "--out", str(logs / "expect.json")]
    first = main(argv)
    assert first in (0, 1)
    written = (logs / "expect.json").read_text()
    assert METRICS in written
    capsys.readouterr()
    assert main(argv) == first  # expect.json is an output, not a launch of the run
    again = (logs / "expect.json").read_text()
    assert again.count(".jsonl") == written.count(".jsonl") and "expect.json" not in again


# --------------------------------------------------------------------------------------------- report
@pytest.mark.parametrize("form", ["the log", "the log folder", "the folder above it"])
def test_report_out_over_its_logs_is_refused(tmp_path, capsys, logs, form):
    out = {"the log": logs / METRICS, "the log folder": logs, "the folder above it": logs.parent}[form]
    before = snapshot(tmp_path)
    refused(capsys, ["report", "--log", str(logs / METRICS), "--out", str(out)], "--out", str(out))
    refused(capsys, ["report", str(logs), "--out", str(out)], "--out", str(out))
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("form", ["file", "folder"])
def test_report_out_over_the_eval_summary_is_refused(tmp_path, capsys, logs, evaluated, form):
    out = evaluated / "eval-summary.json" if form == "file" else evaluated.parent
    before = snapshot(tmp_path)
    refused(capsys, ["report", str(logs), "--eval", str(evaluated), "--out", str(out)], "--out", "the eval summary")
    assert snapshot(tmp_path) == before


def test_report_reproduce_layout_works(tmp_path, capsys, logs, evaluated):
    """reproduce's layout: `report LOGDIR --out reports/<recipe> --eval MERGED/eval`, twice (the second
    replaces the first report set), and a report folder inside the log folder."""
    out = tmp_path / "reports" / GRPO
    for _ in range(2):
        assert main(["report", str(logs), "--out", str(out), "--eval", str(evaluated), "--recipe", GRPO]) == 0
        assert {"report.md", "report.html", "summary.json"} <= {p.name for p in out.iterdir()}
    # nothing left beside it but the lock that keeps two reports from writing it at once
    assert sorted(p.name for p in out.parent.iterdir()) == [f".{GRPO}.report.lock", GRPO]
    assert main(["report", str(logs), "--out", str(logs / "report")]) == 0
    assert (logs / "report" / "report.html").is_file()


def test_report_out_holding_foreign_files_is_refused(tmp_path, capsys, logs):
    """The report set replaces its folder as a whole, so a folder holding anything else is not one it may take."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    before = snapshot(tmp_path)
    refused(capsys, ["report", str(logs), "--out", str(out)], "--out", "thesis.tex")
    assert snapshot(tmp_path) == before


KILL_AT = """
import os, signal, sys
import rlrecipes.report.writer as writer
from rlrecipes.cli import main

real = writer.{name}
def killed(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)
writer.{name} = killed
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("point", ["render_html", "render_markdown"])
def test_a_killed_report_leaves_the_old_set_or_none(tmp_path, logs, point):
    """`report --out D` killed midway left report.md without report.html or summary.json."""
    out = tmp_path / "reports" / GRPO
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    script = KILL_AT.format(name=point)

    def killed_run(title: str) -> None:
        done = subprocess.run([sys.executable, "-c", script, "report", str(logs), "--out", str(out), "--title",
                               title], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == -signal.SIGKILL, done.stderr

    killed_run("first")  # no report before: none after
    assert not out.exists() or not any(out.iterdir()), sorted(p.name for p in out.iterdir())
    assert main(["report", str(logs), "--out", str(out), "--title", "old"]) == 0
    old = snapshot(out)
    killed_run("new")  # a complete report before: the same one after
    assert snapshot(out) == old
    # A SIGKILL leaves atomic_dir's work folder; each report first removes those killed ones left (below).
    left = [p for p in out.parent.iterdir() if p.name.startswith(f".{GRPO}.partial-")]
    assert len(left) == 1
    done = subprocess.run([sys.executable, "-m", "rlrecipes", "report", str(logs), "--out", str(out), "--title",
                           "new"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "# new" in (out / "report.md").read_text()
    # The next report into that --out removes what the killed ones left, and says so.
    assert sorted(p.name for p in out.parent.iterdir()) == [f".{GRPO}.report.lock", GRPO]
    for partial in left:
        assert f"removed {partial}: the work directory of an earlier report into {GRPO} that did not finish" \
            in done.stderr, done.stderr


def test_a_failed_report_leaves_the_old_set(tmp_path, logs, monkeypatch):
    out = tmp_path / "reports" / GRPO
    assert main(["report", str(logs), "--out", str(out), "--title", "old"]) == 0
    old = snapshot(out)
    import rlrecipes.report.writer as writer

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writer, "render_html", fail)
    assert main(["report", str(logs), "--out", str(out), "--title", "new"]) == 1
    assert snapshot(out) == old
    assert sorted(p.name for p in out.parent.iterdir()) == [f".{GRPO}.report.lock", GRPO]  # the work folder is gone


# ----------------------------------------------------------------------------------------------- eval
@pytest.mark.parametrize("form", ["the model", "the folder above it"])
def test_eval_out_over_the_model_is_refused(tmp_path, capsys, form):
    model = tmp_path / "models" / "merged"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    out = model if form == "the model" else model.parent
    before = snapshot(tmp_path)
    refused(capsys, ["eval", str(model), "--skip-lm-eval", "--no-baseline", "--out", str(out)],
            "--out", "the model", str(out))
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("form", ["file", "folder"])
def test_eval_out_over_stored_results_is_refused(tmp_path, capsys, form):
    results = tmp_path / "trained"
    shutil.copytree(LM_EVAL / "trained", results)
    (found,) = results.rglob("results_*.json")
    model = found if form == "file" else results
    before = snapshot(tmp_path)
    refused(capsys, ["eval", str(model), "--from-results", "--no-baseline", "--out", str(model)], "--out",
            "the lm-eval results")
    assert snapshot(tmp_path) == before


def test_eval_out_over_the_baseline_is_refused(tmp_path, capsys):
    model, base = tmp_path / "merged", tmp_path / "base"
    for path in (model, base):
        path.mkdir()
        (path / "config.json").write_text("{}")
    before = snapshot(tmp_path)
    refused(capsys, ["eval", str(model), "--skip-lm-eval", "--baseline", str(base), "--out", str(base)],
            "--out", "the baseline model")
    assert snapshot(tmp_path) == before


def test_eval_into_the_models_eval_folder_works(tmp_path, capsys):
    """reproduce's layout: `eval MERGED --out MERGED/eval`."""
    model = tmp_path / "merged"
    model.mkdir()
    (model / "config.json").write_text("{}")
    assert main(["eval", str(model), "--skip-lm-eval", "--no-baseline", "--out", str(model / "eval")]) == 0
    assert (model / "eval" / "eval-summary.json").is_file()
    assert sorted(p.name for p in model.iterdir()) == ["config.json", "eval"]


# ---------------------------------------------------------------------------------------------- merge
@pytest.mark.parametrize("form", ["the log folder", "the folder above it"])
def test_merge_out_over_its_log_dir_is_refused(tmp_path, capsys, logs, form):
    from rlrecipes.watchdog.simulate import write_pt

    run = tmp_path / "ckpt" / "run"
    actor = run / "global_step_1" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    (actor / "huggingface" / "config.json").write_text("{}")
    for rank in (0, 1):
        write_pt(actor / f"model_world_size_2_rank_{rank}.pt", 64)
    (actor / "fsdp_config.json").write_text('{"FSDP_version": 1, "world_size": 2}')
    (run / "latest_checkpointed_iteration.txt").write_text("1")
    out = logs if form == "the log folder" else logs.parent
    before = snapshot(tmp_path)
    refused(capsys, ["merge", str(run), "--out", str(out), "--log-dir", str(logs), "--force"],
            "--out", "the run's log directory")
    assert snapshot(tmp_path) == before


# --------------------------------------------------------------------------------------------- render
@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(REPO / "recipes", root / "recipes", ignore=shutil.ignore_patterns("*.sh"))
    monkeypatch.setenv("RLRECIPES_HOME", str(root))
    return root


@pytest.mark.parametrize(("form", "what"), [
    ("the recipe", "the recipe"), ("the profile", "the profile"), ("the recipes folder", "the recipe"),
    ("the profiles folder", "the profile"), ("a folder inside recipes", "the recipes folder"),
])
def test_render_out_over_the_recipe_is_refused(tmp_path, capsys, home, form, what):
    recipes = home / "recipes"
    out = {"the recipe": recipes / "smoke-ppo.yaml", "the profile": recipes / "profiles" / "any-1gpu.yaml",
           "the recipes folder": recipes, "the profiles folder": recipes / "profiles",
           "a folder inside recipes": recipes / "runs" / "smoke"}[form]
    before = snapshot(tmp_path)
    refused(capsys, ["render", "smoke-ppo", "--profile", "any-1gpu", "--no-validate", "--force", "--out", str(out)],
            "--out", what)
    assert snapshot(tmp_path) == before


def test_render_into_a_run_folder_works(tmp_path, capsys, home):
    out = tmp_path / "runs" / "smoke"
    assert main(["render", "smoke-ppo", "--profile", "any-1gpu", "--no-validate", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml", "manifest.json", "train.sh"]

"""`rlrecipes report`: metrics from both real log formats (written here by verl's own loggers), restarts,
truncated lines, missing metrics, and the written report."""

from __future__ import annotations

import base64
import json
import math
import re
from pathlib import Path

import pytest

from rlrecipes.cli import main
from rlrecipes.errors import RecipeError
from rlrecipes.verl.run_metrics import Launch, combine, discover, headline, load_run, read_console, read_jsonl
from rlrecipes.verl.logs import parse_console_line, parse_value

# One launch of a run, as verl's trainer logs it: validation at the first step, then training steps with
# numpy scalars (the reducers return them). Values encode (launch, step) so a test can tell them apart.
LOGGER_SCRIPT = r'''
import os, sys, json
import numpy as np
mode, path, first, last, launch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
if mode == "file":
    os.environ["VERL_FILE_LOGGER_PATH"] = path
from verl.utils.tracking import Tracking
tracker = Tracking(project_name="rl", experiment_name="t", default_backend=[mode])
tracker.log(data={"val-core/openai/gsm8k/reward/mean@1": np.float64(0.1 * launch + 0.01 * first)}, step=first)
for step in range(first + 1, last + 1):
    data = {
        "critic/score/mean": np.float64(100 * launch + step),
        "actor/grad_norm": np.float32(0.5),
        "actor/kl_loss": np.float64(0.001 * step),
        "actor/entropy": 1.25,
        "response_length/mean": np.float64(200 + step),
        "timing_s/step": 10.0, "timing_s/gen": 6.0, "timing_s/update_actor": 3.0,
        "perf/throughput": np.float64(1500.0), "perf/total_num_tokens": np.int64(1000),
    }
    if step % 3 == 0:
        data["val-core/openai/gsm8k/reward/mean@1"] = np.float64(0.1 * launch + 0.01 * step)
    tracker.log(data=data, step=step)
'''


def write_launch(run_in_verl, tmp_path: Path, version: str, mode: str, path: Path, first: int, last: int,
                 launch: int) -> None:
    script = tmp_path / "logger_script.py"
    script.write_text(LOGGER_SCRIPT)
    code = f"import runpy, sys; sys.argv = ['x', {mode!r}, {str(path)!r}, '{first}', '{last}', '{launch}']; " \
           f"runpy.run_path({str(script)!r}, run_name='__main__')"
    proc = run_in_verl(version, code, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    if mode == "console":  # the run's console-<stamp>.log is a tee of the trainer's stdout
        path.write_text(proc.stdout)


def cut_last_line(path: Path, keep_fraction: float = 0.5) -> None:
    """Simulate a process killed mid-write: the last line loses its tail and newline."""
    data = path.read_bytes().rstrip(b"\n")
    start = data.rfind(b"\n") + 1
    path.write_bytes(data[: start + int((len(data) - start) * keep_fraction)])


@pytest.mark.verl
@pytest.mark.parametrize("version, mode, pattern", [
    ("0.8.0", "file", "metrics-{}.jsonl"),
    ("0.5.0", "console", "console-{}.log"),
])
def test_restarted_and_truncated_run_from_real_loggers(run_in_verl, tmp_path, version, mode, pattern):
    log_dir = tmp_path / "logs" / "tiny"
    log_dir.mkdir(parents=True)
    first_file = log_dir / pattern.format("20260101T000000Z")
    second_file = log_dir / pattern.format("20260101T010000Z")
    # Launch 1 ran steps 0..6 and died while writing step 6; launch 2 resumed from the step-4 checkpoint.
    write_launch(run_in_verl, tmp_path, version, mode, first_file, 0, 6, launch=1)
    cut_last_line(first_file)
    write_launch(run_in_verl, tmp_path, version, mode, second_file, 4, 9, launch=2)

    run = load_run(log_dir)
    assert sorted(run.steps) == list(range(0, 10))
    # step 4 is the resume step: launch 1's training metrics stay, launch 2 adds its validation
    assert run.series("critic/score/mean") == (
        [1, 2, 3, 4, 5, 6, 7, 8, 9], [101, 102, 103, 104, 205, 206, 207, 208, 209])
    assert run.restarts == [4]
    assert run.launches[0].truncated and not run.launches[1].truncated
    assert any("cut off" in w for w in run.warnings)
    assert any("resumed at step 4" in w for w in run.warnings)
    acc_steps, acc = run.series("val-core/openai/gsm8k/reward/mean@1")
    assert acc_steps == [0, 3, 4, 6, 9]
    assert acc == pytest.approx([0.1, 0.13, 0.24, 0.26, 0.29])
    head = headline(run)
    assert (head["start_accuracy"], head["end_accuracy"]) == pytest.approx((0.1, 0.29))
    assert head["best_step"] == 9 and head["restarts"] == 1
    assert head["train_seconds"] == pytest.approx(10.0 * 9)
    assert head["tokens"] == 9000

    out = tmp_path / "report"
    assert main(["report", str(log_dir), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "0.1000 (step 0) -> 0.2900 (step 9)" in md
    assert "0.2900 at step 9" in md
    assert "1 restart(s)" in md
    for name in ("reward", "val_accuracy", "kl", "grad_norm", "entropy", "response_length", "step_time",
                 "throughput", "overview"):
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    assert not (out / "gpu_memory.png").exists()  # not logged in this run
    assert "Not logged in this run: gpu_memory." in md
    html = (out / "report.html").read_text()
    images = re.findall(r"src=\"data:image/png;base64,([A-Za-z0-9+/=]+)\"", html)
    assert len(images) == 8 and all(base64.b64decode(i)[:4] == b"\x89PNG" for i in images)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["headline"]["last_step"] == 9


# Console logger lines, literally: the first one is what a Ray driver printed for verl 0.5.0's
# LocalLogger in a TaskRunner actor (captured here with ray 2.49.2, numpy 1.26); numpy >= 2 prints
# scalars through pprint as np.float64(...).
CONSOLE_CASES = [
    ("\x1b[36m(TaskRunner pid=22006)\x1b[0m step:1 - critic/score/mean:0.25 - actor/grad_norm:1.5 - "
     "timing_s/step:3.2 - response_length/clip_ratio:0",
     (1, {"critic/score/mean": 0.25, "actor/grad_norm": 1.5, "timing_s/step": 3.2, "response_length/clip_ratio": 0.0})),
    ("step:12 - critic/score/mean:np.float64(0.5) - actor/ppo_kl:np.float32(-1e-05) - "
     "perf/total_num_tokens:np.int64(4096)",
     (12, {"critic/score/mean": 0.5, "actor/ppo_kl": -1e-05, "perf/total_num_tokens": 4096.0})),
    ("step:0 - val-core/openai/gsm8k/reward/mean@1:0.375", (0, {"val-core/openai/gsm8k/reward/mean@1": 0.375})),
    ("(TaskRunner pid=9) step:3 - actor/grad_norm:nan - x:True [repeated 2x across cluster]",
     (3, {"actor/grad_norm": float("nan"), "x": 1.0})),
    ("step:4", (4, {})),
    ("(TaskRunner pid=9) Training Progress:  10%|#  | 1/10 [00:05<00:45]", None),
    ("global_step:4 - foo:1", None),
    ("validation generation end", None),
    ("step:x - a:1", None),
]


@pytest.mark.parametrize("line, expected", CONSOLE_CASES)
def test_parse_console_line(line, expected):
    got = parse_console_line(line)
    if expected is None:
        assert got is None
        return
    assert got[0] == expected[0]
    assert got[1].keys() == expected[1].keys()
    for key, value in expected[1].items():
        assert (math.isnan(got[1][key]) and math.isnan(value)) or got[1][key] == pytest.approx(value), key


@pytest.mark.parametrize("text, value", [
    ("0.5", 0.5), ("np.float64(0.5)", 0.5), ("numpy.float32(2.0)", 2.0), ("np.int64(-3)", -3.0), ("1e-05", 1e-05),
    ("inf", float("inf")), ("True", 1.0), ("False", 0.0), ("'text'", None), ("tensor(0.5)", None), ("", None),
])
def test_parse_value(text, value):
    assert parse_value(text) == value


def test_jsonl_truncated_last_line_and_bad_middle_line(tmp_path):
    path = tmp_path / "metrics-a.jsonl"
    path.write_bytes(
        b'{"step":1,"data":{"critic/score/mean":0.5,"actor/grad_norm":null}}\n'
        b'not json\n'
        b'{"step":2,"data":{"critic/score/mean":0.75,"note":"text"}}\n'
        b'{"step":3,"data":{"critic/score/me'
    )
    launch = read_jsonl(path)
    assert launch.truncated and launch.skipped_lines == 1
    assert sorted(launch.steps) == [1, 2]
    assert launch.steps[2] == {"critic/score/mean": 0.75}
    assert math.isnan(launch.steps[1]["actor/grad_norm"])


def test_console_truncated_last_line_keeps_complete_pairs(tmp_path):
    path = tmp_path / "console-a.log"
    path.write_text("step:1 - a:1.0 - b:2.0\nstep:2 - a:3.0 - b:4.12")  # b's value may be cut short
    launch = read_console(path)
    assert launch.truncated
    assert launch.steps == {1: {"a": 1.0, "b": 2.0}, 2: {"a": 3.0}}


def test_launches_sorted_by_stamp_and_jsonl_preferred(tmp_path):
    (tmp_path / "metrics-2.jsonl").write_text('{"step": 3, "data": {"r": 30}}\n')
    (tmp_path / "metrics-1.jsonl").write_text('{"step": 1, "data": {"r": 1}}\n{"step": 5, "data": {"r": 5}}\n')
    (tmp_path / "console-1.log").write_text("step:1 - r:99\n")  # same launch as metrics-1: ignored
    (tmp_path / "console-3.log").write_text("step:3 - v:7\nstep:4 - r:40\n")  # a later launch, console only
    assert [p.name for p in discover(tmp_path)] == ["metrics-1.jsonl", "metrics-2.jsonl", "console-3.log"]
    run = load_run(tmp_path)
    assert run.series("r") == ([1, 3, 4], [1.0, 30.0, 40.0])
    assert run.steps[3] == {"r": 30.0, "v": 7.0}  # the resume step keeps metrics-2's value, adds console-3's
    assert run.restarts == [3, 3]


def test_combine_skips_empty_launch_and_missing_metrics():
    a = Launch(Path("metrics-1.jsonl"), "jsonl", "1", {1: {"critic/score/mean": 0.1}})
    empty = Launch(Path("metrics-2.jsonl"), "jsonl", "2", {})
    run = combine([empty, a])
    assert run.steps == {1: {"critic/score/mean": 0.1}} and run.restarts == []
    assert run.warnings == ["metrics-2.jsonl: no metrics"]
    head = headline(run)
    assert head["accuracy_metric"] is None and "start_accuracy" not in head and "train_seconds" not in head


def test_report_with_only_reward_logged(tmp_path):
    log = tmp_path / "console-x.log"
    log.write_text("".join(f"(TaskRunner pid=1) step:{s} - critic/score/mean:{s / 10}\n" for s in range(1, 4)))
    out = tmp_path / "rep"
    assert main(["report", "--log", str(log), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "| Validation accuracy | not logged |" in md
    assert "0.1000 -> 0.3000" in md
    assert sorted(p.name for p in out.glob("*.png")) == ["overview.png", "reward.png"]


@pytest.mark.parametrize("argv, message", [
    (["report", "--out", "x"], "nothing to report on"),
    (["report", "/nonexistent/run", "--out", "x"], "run log directory not found"),
    (["report", "--log", "/nonexistent.jsonl", "--out", "x"], "log file not found"),
])
def test_report_input_errors(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_report_empty_dir_is_an_error(tmp_path):
    with pytest.raises(RecipeError, match="no metrics files"):
        load_run(tmp_path)


# A run shaped like a real GRPO run (seeded noise around smooth trends), logged by verl 0.8's file logger
# in two launches: the first dies while writing step 23, the second resumes from the step-20 checkpoint.
EXAMPLE_SCRIPT = r'''
import os, sys
import numpy as np
path, first, last, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
os.environ["VERL_FILE_LOGGER_PATH"] = path
from verl.utils.tracking import Tracking
rng = np.random.default_rng(seed)
tracker = Tracking(project_name="rl", experiment_name="example", default_backend=["file"])
acc = lambda s: np.float64(0.62 + 0.22 * (1 - np.exp(-s / 12)) + rng.normal(0, 0.006))
tracker.log(data={"val-core/openai/gsm8k/reward/mean@1": acc(first)}, step=first)
for step in range(first + 1, last + 1):
    t = step / 40
    gen, old, ref, upd = 38 + rng.normal(0, 2), 6 + rng.normal(0, 0.3), 5 + rng.normal(0, 0.3), 21 + rng.normal(0, 1)
    data = {
        "critic/score/mean": np.float64(0.55 + 0.3 * (1 - np.exp(-step / 10)) + rng.normal(0, 0.02)),
        "actor/kl_loss": np.float64(0.004 * step ** 0.8 / 10 + abs(rng.normal(0, 0.0004))),
        "actor/grad_norm": np.float64(0.35 * np.exp(-t) + 0.1 + abs(rng.normal(0, 0.03))),
        "actor/entropy": np.float64(0.55 - 0.2 * t + rng.normal(0, 0.01)),
        "response_length/mean": np.float64(260 - 60 * t + rng.normal(0, 6)),
        "timing_s/gen": gen, "timing_s/old_log_prob": old, "timing_s/ref": ref, "timing_s/update_actor": upd,
        "timing_s/step": gen + old + ref + upd + 1.5,
        "perf/throughput": np.float64(1700 + rng.normal(0, 40)),
        "perf/total_num_tokens": np.int64(512 * 5 * 420),
        "perf/max_memory_allocated_gb": np.float64(52.5 + rng.normal(0, 0.2)),
        "perf/max_memory_reserved_gb": np.float64(61.0),
    }
    if step % 5 == 0:
        data["val-core/openai/gsm8k/reward/mean@1"] = acc(step)
    tracker.log(data=data, step=step)
'''


@pytest.mark.verl
def test_example_report(run_in_verl, tmp_path):
    """The docs' example report. RLRECIPES_UPDATE_DOCS=1 copies its overview into docs/img/."""
    import os
    import shutil

    logs = tmp_path / "logs" / "qwen2.5-3b-gsm8k-grpo-lora"
    logs.mkdir(parents=True)
    script = tmp_path / "example.py"
    script.write_text(EXAMPLE_SCRIPT)
    for stamp, first, last in (("20260101T000000Z", 0, 23), ("20260101T020000Z", 20, 40)):
        code = (f"import runpy, sys; sys.argv = ['x', {str(logs / f'metrics-{stamp}.jsonl')!r}, '{first}', "
                f"'{last}', '{first}']; runpy.run_path({str(script)!r}, run_name='__main__')")
        proc = run_in_verl("0.8.0", code, timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
    cut_last_line(logs / "metrics-20260101T000000Z.jsonl")
    out = tmp_path / "report"
    assert main(["report", str(logs), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "Steps logged | 0 .. 40, 2 launch(es), 1 restart(s)" in md
    assert (out / "gpu_memory.png").is_file() and "Not logged" not in md
    if os.environ.get("RLRECIPES_UPDATE_DOCS") == "1":
        shutil.copy(out / "overview.png", Path(__file__).resolve().parents[2] / "docs" / "img" / "example-report.png")


def test_headline_by_hand():
    """Every headline figure of a small run, worked out by hand. Validation accuracy is logged as both
    `acc` and `reward` (verl 0.8 logs both; `acc` is preferred); steps 3 and 4 tie at the best accuracy,
    so the earlier one is the best step; step times 10+12+14 s; tokens 1000+1500+2000.7, truncated."""
    acc, rew = "val-core/openai/gsm8k/acc/mean@1", "val-core/openai/gsm8k/reward/mean@1"
    steps = {
        1: {"critic/score/mean": 0.2, acc: 0.3, rew: 0.9, "timing_s/step": 10.0, "perf/total_num_tokens": 1000.0,
            "perf/throughput": 50.0},
        2: {"critic/score/mean": 0.4, "timing_s/step": 12.0, "perf/total_num_tokens": 1500.0, "perf/throughput": 70.0},
        3: {"critic/score/mean": 0.5, acc: 0.6, "timing_s/step": 14.0, "perf/total_num_tokens": 2000.7,
            "perf/throughput": 60.0},
        4: {acc: 0.6, "val/test_score/openai/gsm8k": 0.1},
    }
    run = combine([Launch(Path("metrics-1.jsonl"), "jsonl", "1", steps)])
    assert headline(run) == {
        "first_step": 1, "last_step": 4, "launches": 1, "restarts": 0, "accuracy_metric": acc,
        "start_step": 1, "start_accuracy": 0.3, "end_step": 4, "end_accuracy": 0.6, "best_step": 3,
        "best_accuracy": 0.6, "reward_metric": "critic/score/mean", "start_reward": 0.2, "end_reward": 0.5,
        "train_seconds": 36.0, "seconds_per_step": 12.0, "tokens": 4500, "throughput": 60.0,
    }


# -- literal cases: each reader and rule on its own, every field of what it returns -------------------------

@pytest.mark.parametrize(("name", "data", "expected"), [
    # a bad line in the middle of a file whose last line has no newline: skipped, the file is not truncated
    ("metrics-a.jsonl", b'{"step":1,"data":{"r":1}}\nnot json\n{"step":2,"data":{"r":2}}',
     ({1: {"r": 1.0}, 2: {"r": 2.0}}, False, 1)),
    # two bad lines are two; blank and whitespace-only lines are not lines at all, and reading goes on past them
    ("metrics-b.jsonl", b'{"step":1,"data":{"r":1}}\n\n  \nnot json\n[]\n{"step":3,"data":{"r":3}}\n',
     ({1: {"r": 1.0}, 3: {"r": 3.0}}, False, 2)),
    # the only line, cut off: truncated, nothing skipped
    ("metrics-c.jsonl", b'{"step":1,"da', ({}, True, 0)),
    # a bad last line that did end with its newline was written whole: skipped, not truncated
    ("metrics-d.jsonl", b'{"step":1,"data":{"r":1}}\nnot json\n', ({1: {"r": 1.0}}, False, 1)),
    # the same step logged twice (validation, then training) is one step
    ("metrics-e.jsonl", b'{"step":4,"data":{"v":1}}\n{"step":4,"data":{"r":2}}\n', ({4: {"v": 1.0, "r": 2.0}}, False, 0)),
])
def test_read_jsonl_in_full(tmp_path, name, data, expected):
    from rlrecipes.verl.run_metrics import read_log

    path = tmp_path / name
    path.write_bytes(data)
    steps, truncated, skipped = expected
    assert read_log(path) == Launch(path, "jsonl", name[len("metrics-"):-len(".jsonl")], steps, truncated, skipped)


@pytest.mark.parametrize(("name", "data", "expected"), [
    # Ray and tqdm lines between metric lines are not metrics; the lines after them still are
    ("console-a.log", b"(TaskRunner pid=1) step:1 - r:1.0\nTraining Progress: 10%\n\n(TaskRunner pid=1) step:2 - r:2.0\n",
     ({1: {"r": 1.0}, 2: {"r": 2.0}}, False)),
    # cut off right after the step: no pair survives, the step is not kept
    ("console-b.log", b"step:1 - r:1.0\nstep:2", ({1: {"r": 1.0}}, True)),
    ("console-c.log", b"step:1 - r:1.0\nstep:2 - r:2.", ({1: {"r": 1.0}}, True)),
    # bytes that are not UTF-8 (a multi-byte character cut by the kill, a stray binary write) never stop the read
    ("console-d.log", b"step:1 - r:1.0\n\xe2\x96 garbage \xff\nstep:2 - r:2.0\n", ({1: {"r": 1.0}, 2: {"r": 2.0}}, False)),
    # --log with any name: the stamp is the file's stem
    ("train.log", b"step:3 - r:3.0\n", ({3: {"r": 3.0}}, False)),
])
def test_read_console_in_full(tmp_path, name, data, expected):
    from rlrecipes.verl.run_metrics import read_log

    path = tmp_path / name
    path.write_bytes(data)
    steps, truncated = expected
    stamp = name[len("console-"):-len(".log")] if name.startswith("console-") else "train"
    assert read_log(path) == Launch(path, "console", stamp, steps, truncated, 0)


@pytest.mark.parametrize(("keys", "expected"), [
    # verl 0.8 logs both acc and reward for a rule-based score: acc wins over reward, whatever their names sort as
    (["val-core/z/acc/mean@1", "val-core/a/reward/mean@1"], "val-core/z/acc/mean@1"),
    (["val-core/z/reward/mean@1", "val-core/a/pass/mean@1"], "val-core/z/reward/mean@1"),
    # neither: the first by name
    (["val-core/b/pass/mean@4", "val-core/a/pass/mean@4"], "val-core/a/pass/mean@4"),
    (["val-core/b/acc/mean@1", "val-core/a/acc/mean@1"], "val-core/a/acc/mean@1"),
    # only mean@N of val-core is the accuracy; verl's val-aux and std@N are not, the older val/test_score is next
    (["val-aux/openai/gsm8k/acc/mean@1", "val-core/openai/gsm8k/acc/std@1", "val/test_score/openai/gsm8k"],
     "val/test_score/openai/gsm8k"),
    (["val/test_score/b", "val/test_score/a", "critic/score/mean"], "val/test_score/a"),
    (["critic/score/mean", "x/val-core/acc/mean@1"], None),
])
def test_accuracy_key_cases(keys, expected):
    from rlrecipes.verl.run_metrics import accuracy_key

    run = combine([Launch(Path("metrics-1.jsonl"), "jsonl", "1", {1: {k: 0.5 for k in keys}})])
    assert accuracy_key(run) == expected


def test_combine_warnings_restarts_and_ties_in_full():
    first = Launch(Path("logs/metrics-1.jsonl"), "jsonl", "1", {s: {"r": float(s)} for s in range(1, 6)},
                   truncated=True, skipped_lines=2)
    empty = Launch(Path("logs/metrics-2.jsonl"), "jsonl", "2", {})
    resumed = Launch(Path("logs/metrics-3.jsonl"), "jsonl", "3", {3: {"v": 0.5}, 4: {"r": 40.0}})
    later = Launch(Path("logs/metrics-4.jsonl"), "jsonl", "4", {10: {"r": 100.0}})
    # two files of one stamp (passed with --log from two folders): ordered by path, the later one wins
    b = Launch(Path("y/console-4.log"), "console", "4", {10: {"r": 2.0}})
    a = Launch(Path("x/console-4.log"), "console", "4", {10: {"r": 1.0}})
    run = combine([b, later, resumed, empty, a, first])
    assert run.launches == [first, empty, resumed, later, a, b]
    assert run.steps == {1: {"r": 1.0}, 2: {"r": 2.0}, 3: {"r": 3.0, "v": 0.5}, 4: {"r": 40.0}, 10: {"r": 2.0}}
    assert run.restarts == [3, 10, 10, 10]
    assert run.warnings == [
        "metrics-1.jsonl: last line cut off (ignored)",
        "metrics-1.jsonl: 2 unreadable line(s) skipped",
        "metrics-2.jsonl: no metrics",
        "metrics-3.jsonl: resumed at step 3; replaced 2 later step(s) of the earlier launch",
    ]


def test_headline_of_nothing_and_of_the_fallback_keys():
    assert headline(combine([])) == {"first_step": None, "last_step": None, "launches": 0, "restarts": 0,
                                     "accuracy_metric": None}
    acc = "val-core/openai/gsm8k/acc/mean@1"
    steps = {1: {acc: 0.1, "perf/time_per_step": 4.0}, 2: {acc: 0.5, "perf/time_per_step": 6.0}, 3: {acc: 0.3},
             4: {acc: 0.2, "critic/rewards/mean": 0.7}, 5: {"critic/rewards/mean": 0.9}}
    head = headline(combine([Launch(Path("metrics-1.jsonl"), "jsonl", "1", steps)]))
    assert head == {"first_step": 1, "last_step": 5, "launches": 1, "restarts": 0, "accuracy_metric": acc,
                    "start_step": 1, "start_accuracy": 0.1, "end_step": 4, "end_accuracy": 0.2, "best_step": 2,
                    "best_accuracy": 0.5, "reward_metric": "critic/rewards/mean", "start_reward": 0.7,
                    "end_reward": 0.9, "train_seconds": 10.0, "seconds_per_step": 5.0}


def test_missing_inputs_are_named_in_full(tmp_path):
    from rlrecipes.verl.run_metrics import read_log

    hint = ("(hint: verl 0.8 writes metrics-<stamp>.jsonl (trainer.logger includes 'file'); on verl 0.5 tee stdout "
            "to console-<stamp>.log)")
    cases = [
        (lambda: load_run(tmp_path), f"{tmp_path}: no metrics files (metrics-*.jsonl or console-*.log) {hint}"),
        (lambda: load_run(), f"--log: no metrics files (metrics-*.jsonl or console-*.log) {hint}"),
        (lambda: load_run(logs=[]), f"--log: no metrics files (metrics-*.jsonl or console-*.log) {hint}"),
        (lambda: discover(tmp_path / "gone"), f"{tmp_path}/gone: run log directory not found (hint: pass the run's "
                                              "directory under LOG_DIR, or --log FILE)"),
        (lambda: read_log(tmp_path / "metrics-1.jsonl"), f"{tmp_path}/metrics-1.jsonl: log file not found"),
        (lambda: read_log(tmp_path), f"{tmp_path}: log file not found"),  # a directory is not a log
    ]
    for call, message in cases:
        with pytest.raises(RecipeError) as info:
            call()
        assert str(info.value) == message


# -- the reference curve ---------------------------------------------------------------------------------

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_each_reference_curve_is_its_record():
    """The points a report draws are the record's: a recorded run's log read the way `report` reads any log,
    or the published start and end of an accuracy record."""
    from rlrecipes.reference import ACCURACY_RECORDS, REFERENCE_CURVES
    from rlrecipes.recipe.load import list_recipes

    assert set(REFERENCE_CURVES) <= set(list_recipes())
    for recipe, curve in REFERENCE_CURVES.items():
        assert curve.recipe == recipe
        assert curve.source.startswith("https://") or (REPO_ROOT / curve.source.split("#")[0]).is_file(), curve.source
        if curve.log:
            run = load_run(None, [str(REPO_ROOT / curve.log)])
            xs, ys = run.series("val-core/openai/gsm8k/reward/mean@1")
            assert tuple(zip(xs, ys)) == curve.points, recipe
        else:
            published = ACCURACY_RECORDS[curve.key]
            assert curve.points[0] == (0, published.before)
            assert all(y in (published.before, published.accuracy) for _, y in curve.points)


def test_a_profiles_own_curve_is_its_record_and_a_run_on_it_is_drawn_against_it(tmp_path, capsys):
    """A profile whose stack has its own recorded run of the recipe gets that run as its curve (the Hopper canary:
    60 steps of verl 0.9.1 with vLLM), read from the record as `report` reads any log; a run on another profile,
    or a report without --profile, keeps the recipe's."""
    import json

    from rlrecipes.cli import main
    from rlrecipes.recipe.load import load_recipe
    from rlrecipes.reference import PROFILE_CURVES, REFERENCE_CURVES, reference_curve

    for (recipe, profile), curve in PROFILE_CURVES.items():
        assert curve.recipe == recipe and profile in load_recipe(recipe).profiles
        run = load_run(None, [str(REPO_ROOT / curve.log)])
        assert tuple(zip(*run.series("val-aux/openai/gsm8k/reward/mean@1"))) == curve.points, (recipe, profile)
        assert (REPO_ROOT / curve.source).is_file() and curve.key not in {c.key for c in REFERENCE_CURVES.values()}
    hopper = PROFILE_CURVES[("canary-grpo-lora", "any-1gpu-hopper")]
    assert reference_curve("canary-grpo-lora", "any-1gpu-hopper") is hopper
    assert reference_curve("canary-grpo-lora", "any-1gpu") is REFERENCE_CURVES["canary-grpo-lora"]
    assert reference_curve("canary-grpo-lora") is REFERENCE_CURVES["canary-grpo-lora"]
    assert reference_curve("smoke-ppo", "any-1gpu-hopper") is None and reference_curve(None) is None
    logs = REPO_ROOT / "docs" / "bench" / "gpu-data" / "recovery-faults-hopper-6" / "logs"
    shown = {}
    for name, extra in (("hopper", ["--profile", "any-1gpu-hopper"]), ("plain", [])):
        assert main(["report", str(logs), "--recipe", "canary-grpo-lora", "--out", str(tmp_path / name), *extra]) == 0
        shown[name] = json.loads((tmp_path / name / "summary.json").read_text())["headline"]["reference_curve"]
    capsys.readouterr()
    assert shown == {"hopper": hopper.key, "plain": REFERENCE_CURVES["canary-grpo-lora"].key}


def test_the_reference_is_drawn_in_the_validation_plot_only():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rlrecipes.reference import REFERENCE_CURVES
    from rlrecipes.report.plots import PANELS, _draw, panel_keys

    curve = REFERENCE_CURVES["canary-ppo"]
    run = load_run(None, [str(REPO_ROOT / REFERENCE_CURVES["canary-grpo-lora"].log)])
    drawn = {}
    for panel in PANELS:
        keys = [k for k in panel_keys(panel, run.keys) if run.has(k)]
        if not keys:
            continue
        fig, ax = plt.subplots()
        _draw(ax, run, panel, keys, curve)
        drawn[panel.name] = {line.get_label(): list(zip(line.get_xdata(), line.get_ydata())) for line in ax.lines}
        plt.close(fig)
    label = "reference: h200-canary-ppo"
    assert drawn["val_accuracy"][label] == list(curve.points)
    assert [name for name, lines in drawn.items() if label in lines] == ["val_accuracy"]
    fig, ax = plt.subplots()  # two published points (a start and an end) are markers, not a line between them
    _draw(ax, run, PANELS[1], ["val-core/openai/gsm8k/reward/mean@1"], REFERENCE_CURVES["qwen2.5-3b-gsm8k-grpo-lora"])
    (ref,) = [line for line in ax.lines if line.get_label().startswith("reference")]
    assert ref.get_linestyle() == "None" and len(ref.get_xdata()) == 2
    plt.close(fig)


def test_report_names_the_reference_curve(tmp_path):
    log = REPO_ROOT / "docs/bench/gpu-data/canary/ppo1e5/console-20261202T155731Z.log"
    assert main(["report", "--log", str(log), "--recipe", "canary-ppo", "--out", str(tmp_path / "with")]) == 0
    summary = json.loads((tmp_path / "with" / "summary.json").read_text())
    assert summary["headline"]["reference_curve"] == "h200-canary-ppo"
    assert "Reference curve" in (tmp_path / "with" / "report.md").read_text()
    assert main(["report", "--log", str(log), "--out", str(tmp_path / "without")]) == 0  # no recipe: no curve
    assert "reference_curve" not in json.loads((tmp_path / "without" / "summary.json").read_text())["headline"]


def test_phase_table_of_a_recorded_run(tmp_path):
    """The report's per-phase medians and MFU come from the run's own metrics: verl's JSONL of the 3B recipe on
    an H200 (steps 1 and 2; step 1, start-up, left out) and of the canary (60 steps)."""
    repo = Path(__file__).resolve().parents[2]
    log = repo / "docs/bench/gpu-data/hopper-3b-64/variant/metrics.jsonl"
    step2 = next(json.loads(line)["data"] for line in log.read_text().splitlines() if json.loads(line)["step"] == 2)
    out = tmp_path / "r"
    assert main(["report", "--log", str(log), "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    phases = summary["phases"]
    assert phases["warmup_steps_left_out"] == [1]
    assert {name: v["median_s"] for name, v in phases["phases"].items()} == {
        name: step2[f"timing_s/{key}"] for name, key in (("gen", "gen"), ("old_log_prob", "old_log_prob"),
                                                         ("ref", "ref"), ("update_actor", "update_actor"),
                                                         ("update_weights", "update_weights"))}
    assert phases["mfu"] == {"perf/mfu/actor": {"median": step2["perf/mfu/actor"], "steps": 1}}
    md = (out / "report.md").read_text()
    assert f"| update_actor | `timing_s/update_actor` | {step2['timing_s/update_actor']:.2f} s | 1 |" in md
    assert "| MFU, actor | `perf/mfu/actor` | 0.283 | 1 |" in md
    assert "update_actor</td>" in (out / "report.html").read_text()
    canary = repo / "docs/bench/gpu-data/canary-hopper/canary/logs/canary-grpo-lora"
    assert main(["report", str(canary), "--out", str(tmp_path / "c")]) == 0
    md = (tmp_path / "c" / "report.md").read_text()
    # validation and checkpoint saves: timed in the 6 validation steps and the 2 save steps only
    assert "| validation | `timing_s/testing` | 2.80 s | 6 |" in md and "| save | `timing_s/save_checkpoint` |" in md


def test_a_run_that_logged_no_phase_has_no_phase_table(tmp_path):
    log = tmp_path / "metrics-1.jsonl"
    log.write_text(json.dumps({"step": 1, "data": {"critic/score/mean": 0.5}}) + "\n")
    assert main(["report", "--log", str(log), "--out", str(tmp_path / "r")]) == 0
    assert "Where a step's time goes" not in (tmp_path / "r" / "report.md").read_text()
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["phases"]["phases"] == {}

"""rlrecipes.verl.logs: the one parser of verl's console and file-logger output (smoke and report use it).
Literal cases first; then lines written by the real loggers of each pinned verl."""

from __future__ import annotations

import json
import math

import pytest

from rlrecipes.verl.logs import console_step, parse_jsonl_record, parse_steps, resumed_from

# (line, console_step(line)): only a `step:N - ...` line whose metrics follow ends a step.
STEP_CASES = [
    ("\x1b[36m(TaskRunner pid=22006)\x1b[0m step:3 - critic/score/mean:0.25", 3),
    ("(TaskRunner pid=9) step:12 - a:np.float64(0.5) [repeated 2x across cluster]", 12),
    ("  step:4 - a:1", 4),  # leading blanks (a tee with indentation)
    ("step:0 - val-core/openai/gsm8k/reward/mean@1:0.375", 0),
    ("step:4", None),  # no metrics: nothing finished
    ("Training Progress: 50%| 1/2 step:1 - a:1", None),  # `step:` inside another message
    ("global_step:4 - foo:1", None),
    ("mystep:3 - a:1", None),
    ("step:x - a:1", None),
]


@pytest.mark.parametrize("line, step", STEP_CASES)
def test_console_step(line, step):
    assert console_step(line) == step


def test_parse_steps_values_and_last_line_wins():
    text = ("(TaskRunner pid=1) step:1 - a:np.float32(-1e-05) - b:np.int64(3) - c:True - d:tensor(0.5) - e:nan\n"
            "noise\n"
            "step:2 - a:1\n"
            "step:2 - a:2\n")
    steps = parse_steps(text)
    assert sorted(steps) == [1, 2]
    assert steps[1]["a"] == -1e-05 and steps[1]["b"] == 3.0 and steps[1]["c"] == 1.0
    assert "d" not in steps[1] and math.isnan(steps[1]["e"])
    assert steps[2] == {"a": 2.0}


@pytest.mark.parametrize("text, step", [
    ("(TaskRunner pid=1) Setting global step to 2", 2),
    ("INFO:verl.trainer.ppo.v1.trainer_base:Resuming from /c/x, setting global step to 7", 7),
    ("Training from scratch", None),
])
def test_resumed_from(text, step):
    assert resumed_from(text) == step


@pytest.mark.parametrize("line, expected", [
    (b'{"step": 3, "data": {"critic/score/mean": 0.5, "x": null, "flag": true, "name": "text"}}',
     (3, {"critic/score/mean": 0.5, "x": float("nan"), "flag": 1.0})),
    ('{"step": 0, "data": {}}', (0, {})),
])
def test_parse_jsonl_record(line, expected):
    step, metrics = parse_jsonl_record(line)
    assert step == expected[0] and metrics.keys() == expected[1].keys()
    for key, value in expected[1].items():
        assert (math.isnan(value) and math.isnan(metrics[key])) or metrics[key] == value


@pytest.mark.parametrize("line", [
    '{"step": 1.5, "data": {}}', '{"step": true, "data": {}}', '{"step": -1, "data": {}}',
    '{"step": "3", "data": {}}', '{"step": 1, "data": [1]}', '{"data": {}}', '{"step": 1', "",
])
def test_parse_jsonl_record_rejects(line):
    with pytest.raises((ValueError, KeyError, TypeError)):
        parse_jsonl_record(line)


@pytest.mark.verl
@pytest.mark.parametrize("version", ["0.5.0", "0.8.0"])
def test_lines_written_by_verls_own_loggers(run_in_verl, tmp_path, version):
    """verl's console logger (concat_dict_to_str, pprint of numpy scalars) and, where it exists, its file
    logger (orjson with numpy) write what this parser reads back."""
    from rlrecipes.verl.specs import spec_for

    jsonl = tmp_path / "metrics.jsonl"
    code = (
        "import numpy as np, os\n"
        "from verl.utils.logger.aggregate_logger import concat_dict_to_str\n"
        "data = {'critic/score/mean': np.float64(0.5), 'perf/total_num_tokens': np.int64(4096),"
        " 'actor/ppo_kl': np.float32(-0.25), 'actor/grad_norm': float('nan'), 'flag': True}\n"
        "print(concat_dict_to_str(data, step=7))\n"
        "if os.environ.get('FILE_LOGGER') == '1':\n"
        "    from verl.utils.tracking import FileLogger\n"
        "    logger = FileLogger('p', 'e')\n"
        "    logger.log(data, step=7)\n"
        "    logger.finish()\n"
    )
    file_logger = spec_for(version).file_logger
    result = run_in_verl(version, code, env={"VERL_FILE_LOGGER_PATH": str(jsonl),
                                             "FILE_LOGGER": "1" if file_logger else "0"})
    assert result.returncode == 0, result.stderr
    line = next(ln for ln in result.stdout.splitlines() if ln.startswith("step:"))
    assert console_step(line) == 7
    metrics = parse_steps(line)[7]
    assert metrics["critic/score/mean"] == 0.5 and metrics["perf/total_num_tokens"] == 4096.0
    assert metrics["actor/ppo_kl"] == -0.25 and metrics["flag"] == 1.0 and math.isnan(metrics["actor/grad_norm"])
    if file_logger:
        record = jsonl.read_bytes().splitlines()[0]
        assert json.loads(record)["step"] == 7
        step, from_file = parse_jsonl_record(record)
        assert step == 7 and from_file.keys() == metrics.keys()
        assert from_file["perf/total_num_tokens"] == 4096.0 and math.isnan(from_file["actor/grad_norm"])

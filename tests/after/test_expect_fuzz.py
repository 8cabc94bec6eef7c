"""Malformed input to `rlrecipes expect` is bad input (exit 2) or a skipped, counted line -- never a crash
(exit 70, the CLI's "a bug"): the metrics readers and the eval summary reader, by example and fuzzed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlrecipes.after.evaluate import load_summary
from rlrecipes.cli import main
from rlrecipes.errors import RecipeError
from rlrecipes.verl.logs import parse_console_line
from rlrecipes.verl.run_metrics import read_console, read_jsonl

REPO = Path(__file__).resolve().parents[2]
CANARY = REPO / "docs" / "bench" / "gpu-data" / "canary-hopper" / "canary"
LOG = CANARY / "logs" / "canary-grpo-lora" / "metrics-20261203T122403Z.jsonl"
EVAL = CANARY / "merged" / "eval" / "eval-summary.json"
DEEP = "[" * 100_000 + "]" * 100_000


def judge(tmp_path: Path, extra_line: str, summary: str | None = None) -> int:
    folder = tmp_path / "logs" / "canary-grpo-lora"
    folder.mkdir(parents=True)
    (folder / LOG.name).write_text(LOG.read_text() + extra_line + "\n")
    args = ["expect", str(folder), "--recipe", "canary-grpo-lora", "--profile", "any-1gpu-hopper", "--json"]
    if summary is not None:
        (tmp_path / "eval-summary.json").write_text(summary)
        args += ["--eval", str(tmp_path / "eval-summary.json")]
    return main(args)


@pytest.mark.parametrize("line, code", ids=["401-digit value", "401-digit step", "deep nesting", "data a list",
                                            "step a string", "binary"], argvalues=[
    # a 401-digit number is a number, but no float: the value is inf, a finding of the check that reads it
    ('{"step":60,"data":{"critic/score/mean":' + "9" * 401 + "}}", 1),
    ('{"step":' + "9" * 401 + ',"data":{"critic/score/mean":0.5}}', 1),  # not a step: skipped (no eval: missed)
    ('{"step":61,"data":{"x":' + DEEP + "}}", 1),                         # too deep to read: skipped
    ('{"step":61,"data":[1,2]}', 1),
    ('{"step":"61","data":{}}', 1),
    ("\x00\xff garbage", 1),
])
def test_a_malformed_metrics_line_is_no_crash(tmp_path, capsys, line, code):
    assert judge(tmp_path, line) == code
    assert capsys.readouterr().err == ""


def test_an_overflowing_value_is_inf_and_missed(tmp_path, capsys):
    folder = tmp_path / "logs" / "canary-grpo-lora"
    folder.mkdir(parents=True)
    lines = LOG.read_text().splitlines()
    lines[-1] = lines[-1].replace('"critic/score/mean":', '"critic/score/mean":' + "9" * 401 + ',"x":', 1)
    (folder / LOG.name).write_text("\n".join(lines) + "\n")
    assert main(["expect", str(folder), "--recipe", "canary-grpo-lora", "--profile", "any-1gpu-hopper", "--json",
                 "--eval", str(EVAL)]) == 1
    reward = [c for c in json.loads(capsys.readouterr().out)["checks"] if c["name"].startswith("training reward")]
    assert (reward[0]["status"], reward[0]["detail"]) == ("missed", "not a number at step 60")


@pytest.mark.parametrize("summary, message", ids=["fast_eval a number", "entry a list", "n a string",
                                                  "accuracy a string", "401-digit n", "a list", "deep nesting",
                                                  "truncated"], argvalues=[
    ('{"fast_eval": 3}', "fast_eval is not an object"),
    ('{"fast_eval": {"trained": []}}', "fast_eval.trained is not an object"),
    ('{"fast_eval": {"trained": {"n": "512", "accuracy": 0.4}}}', "fast_eval.trained.n is not a whole number"),
    ('{"fast_eval": {"trained": {"n": 512, "accuracy": "high"}}}', "fast_eval.trained.accuracy is not a number"),
    ('{"fast_eval": {"trained": {"n": ' + "9" * 401 + ', "accuracy": 0.4}}}', "fast_eval.trained.n is too large"),
    ("[1, 2]", "an eval summary is a JSON object"),
    ('{"fast_eval": ' + DEEP + "}", "unreadable eval summary: nested too deeply"),
    ('{"fast_eval": {"trai', "unreadable eval summary"),
])
def test_a_malformed_eval_summary_is_bad_input(tmp_path, capsys, summary, message):
    assert judge(tmp_path, "", summary) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err, err


# ------------------------------------------------------------------------------------------------- fuzz
JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(min_value=-10**500, max_value=10**500),
                      st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8))
JSON_VALUE = st.recursive(JSON_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                             st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                          max_leaves=12)


def _record_line(record, cut: int | None, nesting: int) -> bytes:
    text = json.dumps(record)
    if nesting:
        text = text.replace('"data": ', '"data": ' + "[" * nesting, 1) + "]" * nesting
    data = text.encode()
    return data[:cut] if cut is not None else data


LINES = st.one_of(
    st.binary(max_size=64),
    st.builds(_record_line, st.fixed_dictionaries({"step": JSON_VALUE, "data": JSON_VALUE}),
              st.none() | st.integers(min_value=0, max_value=40), st.sampled_from([0, 0, 5000, 50_000])),
    st.builds(_record_line, st.fixed_dictionaries({"step": st.integers(0, 10), "data": st.dictionaries(
        st.text(max_size=6), JSON_VALUE, max_size=4)}), st.none(), st.just(0)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(LINES, max_size=6))
def test_fuzz_the_metrics_readers_never_crash(tmp_path, lines):
    path = tmp_path / "metrics-1.jsonl"
    raw = b"\n".join(lines)
    path.write_bytes(raw)
    launch = read_jsonl(path)
    # every non-blank line is a step, a skipped line or the truncated last one
    assert len(launch.steps) <= sum(1 for line in lines if line.strip())
    assert all(isinstance(v, float) for m in launch.steps.values() for v in m.values())
    console = tmp_path / "console-1.log"
    console.write_bytes(raw)
    read_console(console)
    for line in raw.decode("utf-8", errors="replace").split("\n"):
        parse_console_line(line)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(JSON_VALUE, st.fixed_dictionaries({"fast_eval": JSON_VALUE}),
                 st.fixed_dictionaries({"fast_eval": st.dictionaries(st.sampled_from(["trained", "baseline"]),
                                                                     JSON_VALUE, max_size=2)})),
       st.sampled_from([0, 0, 50_000]))
def test_fuzz_the_eval_summary_reader_never_crashes(tmp_path, summary, nesting):
    from rlrecipes.after.evaluate import fast_evals  # the typed reader

    path = tmp_path / "eval-summary.json"
    path.write_text("[" * nesting + json.dumps(summary) + "]" * nesting)
    try:
        fast_evals(load_summary(path))
    except RecipeError:
        pass


def test_the_recursion_limit_is_left_as_found():
    assert sys.getrecursionlimit() < 50_000

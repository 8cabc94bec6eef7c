"""`rlrecipes eval`: the base-vs-trained table from stored lm-eval results (real format), the lm-eval
command, the fast in-repo evaluation with the training reward, and an end-to-end run of lm-eval's hf
backend on a tiny model with local GSM8K files."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rlrecipes.cli import main
from rlrecipes.errors import RecipeError
from rlrecipes.after.evaluate import (
    Row, eval_table, find_results, lm_eval_command, load_results, parse_results, table_cells,
)
from rlrecipes.rewards.accuracy import score_responses

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lm_eval"
sys.path.insert(0, str(FIXTURES))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def test_stored_results_parse():
    trained = load_results(FIXTURES / "trained")
    assert trained.path.endswith(".json") and "results_" in trained.path
    scores = {(task, f): (s.value, s.n) for task, by_filter in trained.scores.items() for f, s in by_filter.items()}
    assert scores == {
        ("gsm8k", "strict-match"): (0.5, 4), ("gsm8k", "flexible-extract"): (0.75, 4),
        ("gsm8k_cot", "strict-match"): (0.5, 4), ("gsm8k_cot", "flexible-extract"): (0.75, 4),
    }
    assert trained.scores["gsm8k"]["flexible-extract"].stderr == pytest.approx(0.25)
    tiny = load_results(FIXTURES / "tiny-hf")
    assert tiny.model.endswith("tiny-qwen2")  # pretrained= of the hf backend's model_args
    assert {s.value for by_filter in tiny.scores.values() for s in by_filter.values()} == {0.0}


def test_table_from_stored_results():
    rows = eval_table(load_results(FIXTURES / "trained"), load_results(FIXTURES / "baseline"), ("gsm8k", "gsm8k_cot"))
    assert [(r.task, r.filter, r.baseline, r.trained, r.delta) for r in rows] == [
        ("gsm8k", "strict-match", 0.25, 0.5, 0.25),
        ("gsm8k", "flexible-extract", 0.25, 0.75, 0.5),
        ("gsm8k_cot", "strict-match", 0.25, 0.5, 0.25),
        ("gsm8k_cot", "flexible-extract", 0.25, 0.75, 0.5),
    ]
    header, cells = table_cells(rows, with_baseline=True)
    assert header == ["task", "filter", "n", "base %", "trained %", "delta"]
    assert cells[1] == ["gsm8k", "flexible-extract", "4", "25.0", "75.0", "+50.0"]


def test_eval_from_results_cli(capsys, tmp_path):
    assert main(["eval", str(FIXTURES / "trained"), "--baseline", str(FIXTURES / "baseline"), "--from-results"]) == 0
    out = capsys.readouterr().out
    assert "gsm8k_cot" in out and "+50.0" in out and "+25.0" in out and "75.0" in out
    assert not list(FIXTURES.rglob("eval-summary.json"))
    # with --out, the table is stored for `rlrecipes report --eval`
    assert main(["eval", str(FIXTURES / "trained"), "--baseline", str(FIXTURES / "baseline"), "--from-results",
                 "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "eval-summary.json").read_text())
    assert [r["delta"] for r in summary["rows"]] == [0.25, 0.5, 0.25, 0.5]


@pytest.mark.parametrize("data, expected", [
    # a task only one side has: no delta
    ({"results": {"gsm8k": {"exact_match,strict-match": 0.5}}}, [("gsm8k", "strict-match", None, 0.5, None)]),
    # N/A stderr, other metrics and the alias are ignored; unknown filters come after the standard ones
    ({"results": {"gsm8k": {"alias": "gsm8k", "exact_match,custom": 0.1, "exact_match_stderr,custom": "N/A",
                            "acc,none": 0.9, "exact_match,flexible-extract": 0.2}}},
     [("gsm8k", "flexible-extract", None, 0.2, None), ("gsm8k", "custom", None, 0.1, None)]),
    ({"results": {"gsm8k": {"exact_match,strict-match": "N/A"}}}, []),
    ({"results": {}}, []),
])
def test_table_edge_cases(data, expected):
    rows = eval_table(parse_results(data))
    assert [(r.task, r.filter, r.baseline, r.trained, r.delta) for r in rows] == expected


def test_table_baseline_missing_a_task():
    trained = parse_results({"results": {"gsm8k": {"exact_match,strict-match": 0.6}}})
    base = parse_results({"results": {"gsm8k_cot": {"exact_match,strict-match": 0.4}}})
    rows = eval_table(trained, base, ("gsm8k", "gsm8k_cot"))
    assert rows == [Row("gsm8k", "strict-match", None, 0.6, None), Row("gsm8k_cot", "strict-match", 0.4, None, None)]
    assert table_cells(rows, True)[1][0][-1] == "-"


@pytest.mark.parametrize("content, message", [
    (None, "no lm-eval results file"),
    ('{"version": 1}', "not an lm-eval results file"),
    ("{not json", "unreadable lm-eval results JSON"),
])
def test_results_errors(tmp_path, content, message):
    if content is not None:
        (tmp_path / "results_2026.json").write_text(content)
    with pytest.raises(RecipeError, match=message):
        load_results(tmp_path)


def test_find_results_picks_newest(tmp_path):
    for stamp in ("2026-01-02T00-00-00", "2026-01-01T00-00-00"):
        (tmp_path / "m").mkdir(exist_ok=True)
        (tmp_path / "m" / f"results_{stamp}.json").write_text("{}")
    assert find_results(tmp_path).name == "results_2026-01-02T00-00-00.json"


@pytest.mark.parametrize("backend, kwargs, present, absent", [
    ("vllm", {}, ["--model", "vllm", "pretrained=/m,dtype=auto,tensor_parallel_size=1,gpu_memory_utilization=0.8",
                  "gsm8k,gsm8k_cot", "--log_samples"], ["--limit", "--apply_chat_template"]),
    ("hf", {"limit": 5, "apply_chat_template": True, "dtype": "float32"},
     ["--model", "hf", "pretrained=/m,dtype=float32", "--limit", "5", "--apply_chat_template",
      "--fewshot_as_multiturn"], ["tensor_parallel_size=1"]),
])
def test_lm_eval_command(tmp_path, backend, kwargs, present, absent):
    cmd = lm_eval_command("/m", ("gsm8k", "gsm8k_cot"), backend, tmp_path, python="py", **kwargs)
    assert cmd[:4] == ["py", "-m", "lm_eval", "run"]
    joined = " ".join(cmd)
    for item in present:
        assert item in cmd, item
    for item in absent:
        assert item not in joined, item
    assert cmd[cmd.index("--output_path") + 1] == str(tmp_path)


@pytest.mark.parametrize("response, truth, strict, flexible", [
    ("Step by step: 48 / 2 = 24, 48 + 24 = 72.\n#### 72", "72", 1.0, 1.0),
    ("The total is 72", "72", 0.0, 1.0),
    ("#### 1,200", "1200", 1.0, 1.0),
    ("#### 71", "72", 0.0, 0.0),
    ("", "72", 0.0, 0.0),
])
def test_score_responses_uses_training_reward(response, truth, strict, flexible):
    summary, records = score_responses([response], [truth], ["openai/gsm8k"])
    assert (records[0]["strict"], records[0]["flexible"]) == (strict, flexible)
    assert (summary["accuracy"], summary["flexible_accuracy"]) == (strict, flexible)


def write_gsm8k_parquet(path: Path, rows: list[tuple[str, str]]) -> Path:
    import pandas as pd

    suffix = " Let's think step by step and output the final answer after \"####\"."
    frame = pd.DataFrame([{
        "data_source": "openai/gsm8k",
        "prompt": [{"role": "user", "content": q + suffix}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": a},
        "extra_info": {"split": "test", "index": i, "answer": f"#### {a}", "question": q},
    } for i, (q, a) in enumerate(rows)])
    frame.to_parquet(path)
    return path


@pytest.mark.slow
def test_eval_end_to_end_hf_backend(tmp_path, capsys):
    """lm-eval's hf backend on a random tiny Qwen2 with local GSM8K files, then the fast eval."""
    import torch
    from make_fixture import write_local_tasks
    from support.tinytok import build_tokenizer
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    model_dir = tmp_path / "tiny"
    tokenizer = AutoTokenizer.from_pretrained(build_tokenizer(model_dir, vocab_size=300))
    torch.manual_seed(0)
    Qwen2ForCausalLM(Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, tie_word_embeddings=True, max_position_embeddings=2048,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)).save_pretrained(model_dir)
    tasks = write_local_tasks(tmp_path / "gsm8k_local")
    parquet = write_gsm8k_parquet(tmp_path / "test.parquet", [("What is 2 + 3?", "5"), ("What is 10 - 4?", "6")])
    out = tmp_path / "eval"
    rc = main(["eval", str(model_dir), "--backend", "hf", "--tasks", "gsm8k", "--include-path", str(tasks),
               "--limit", "2", "--batch-size", "2", "--device", "cpu", "--dtype", "float32",
               "--gen-kwargs", "max_gen_toks=8", "--out", str(out),
               "--fast-data", str(parquet), "--max-new-tokens", "8"])
    assert rc == 0
    summary = json.loads((out / "eval-summary.json").read_text())
    assert summary["backend"] == "hf"
    assert [(r["task"], r["filter"], r["n"]) for r in summary["rows"]] == [
        ("gsm8k", "strict-match", 2), ("gsm8k", "flexible-extract", 2)]
    assert list((out / "lm_eval" / "trained").rglob("samples_gsm8k_*.jsonl"))
    assert summary["fast_eval"]["trained"]["n"] == 2
    records = [json.loads(line) for line in (out / "fast_eval" / "trained.jsonl").read_text().splitlines()]
    assert [r["ground_truth"] for r in records] == ["5", "6"]
    assert "fast eval (trained)" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["eval", "/nonexistent/model"], "model directory not found"),
    (["eval", "/nonexistent/model", "--from-results"], "no lm-eval results file"),
    (["eval", "x", "--tasks", ",", "--from-results"], "no tasks given"),
])
def test_eval_input_errors(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_report_includes_eval_table(tmp_path):
    out = tmp_path / "eval"
    out.mkdir()
    rows = eval_table(load_results(FIXTURES / "trained"), load_results(FIXTURES / "baseline"), ("gsm8k",))
    (out / "eval-summary.json").write_text(json.dumps({
        "baseline": "base", "rows": [dict(r.__dict__, delta=r.delta) for r in rows],
        "fast_eval": {"trained": {"n": 50, "accuracy": 0.42, "flexible_accuracy": 0.5}}}))
    log = tmp_path / "metrics-1.jsonl"
    log.write_text('{"step": 1, "data": {"critic/score/mean": 0.5}}\n')
    assert main(["report", "--log", str(log), "--eval", str(out), "--out", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "| gsm8k | strict-match | 4 | 25.0 | 50.0 | +25.0 |" in md
    assert "| trained | 50 | 42.0 | 50.0 |" in md
    assert "<td>+25.0</td>" in (tmp_path / "rep" / "report.html").read_text()


@pytest.mark.parametrize("info, base_exists, expected", [
    ({"base_model": "BASE"}, True, "BASE"),
    ({"base_model": "BASE"}, False, None),
    ({"base_model": "BASE", "base_note": "verl model_merger's bf16 copy of the frozen base"}, True, None),
    ({"base_model": None}, True, None),
    (None, True, None),
    ("{broken", True, None),
])
def test_baseline_from_merge_info(tmp_path, info, base_exists, expected):
    from rlrecipes.after.evaluate import baseline_from_merge_info

    base = tmp_path / "base"
    if base_exists:
        base.mkdir()
        (base / "config.json").write_text("{}")
    model = tmp_path / "merged"
    model.mkdir()
    if isinstance(info, dict):
        info = {k: (str(base) if v == "BASE" else v) for k, v in info.items()}
        (model / "merge-info.json").write_text(json.dumps(info))
    elif isinstance(info, str):
        (model / "merge-info.json").write_text(info)
    assert baseline_from_merge_info(model) == (str(base) if expected == "BASE" else expected)


@pytest.mark.parametrize("content, expected", [
    ('{"dtype": "float32"}', "float32"),
    ('{"dtype": "bfloat16"}', "bfloat16"),
    ('{"dtype": "fp32"}', None),
    ('{}', None),
    ("[1]", None),
    (None, None),
])
def test_dtype_from_merge_info(tmp_path, content, expected):
    from rlrecipes.after.evaluate import dtype_from_merge_info

    if content is not None:
        (tmp_path / "merge-info.json").write_text(content)
    assert dtype_from_merge_info(tmp_path) == expected

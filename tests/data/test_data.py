"""`rlrecipes data gsm8k` and `write_dataset`: verl's layout, determinism, bad rows, length filter,
and the files loading in the pinned verl's RLHFDataset."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rlrecipes.cli import main
from rlrecipes.data import gsm8k as data
from rlrecipes.data.gsm8k import extract_ground_truth, write_dataset
from rlrecipes.errors import RecipeError
from rlrecipes.fsutil import sha256_file
from rlrecipes.rewards.gsm8k import compute_score

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "gsm8k"
VERL_INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'

# verl's examples/data_preprocess/gsm8k.py output as `datasets` writes it (struct fields sorted).
VERL_SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", pa.list_(pa.struct([("content", pa.string()), ("role", pa.string())]))),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("ground_truth", pa.string()), ("style", pa.string())])),
        (
            "extra_info",
            pa.struct([("answer", pa.string()), ("index", pa.int64()), ("question", pa.string()), ("split", pa.string())]),
        ),
    ]
)


def run_cli(*argv: str) -> int:
    return main(["data", "gsm8k", *argv])


def fixture_rows(split: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURE / "jsonl" / f"{split}.jsonl").read_text().splitlines()]


def test_fixture_parquet_matches_jsonl():
    for split in ("train", "test"):
        table = pq.read_table(FIXTURE / "main" / f"{split}-00000-of-00001.parquet")
        assert table.to_pylist() == fixture_rows(split), "rerun tests/fixtures/gsm8k/make_parquet.py"


def test_writes_verl_layout_from_local_dataset_dir(tmp_path, capsys):
    out = tmp_path / "gsm8k"
    assert run_cli("--source", str(FIXTURE), "--out", str(out)) == 0
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "test.parquet", "train.parquet"]
    train = pq.read_table(out / "train.parquet")
    assert train.schema.remove_metadata() == VERL_SCHEMA
    first = train.to_pylist()[0]
    question = fixture_rows("train")[0]["question"]
    assert first == {
        "data_source": "openai/gsm8k",
        "prompt": [{"content": question + " " + VERL_INSTRUCTION, "role": "user"}],
        "ability": "math",
        "reward_model": {"ground_truth": "29", "style": "rule"},
        "extra_info": {"answer": fixture_rows("train")[0]["answer"], "index": 0, "question": question, "split": "train"},
    }
    truths = [r["reward_model"]["ground_truth"] for r in train.to_pylist()]
    assert truths == ["29", "288", "41", "780", "1500", "0", "-8", "2.5", "137", "300"]
    test = pq.read_table(out / "test.parquet").to_pylist()
    assert [r["extra_info"]["split"] for r in test] == ["test"] * 5
    assert [r["extra_info"]["index"] for r in test] == [0, 1, 2, 3, 4]

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["template"] == "verl"
    assert manifest["source"] == str(FIXTURE)
    assert manifest["splits"]["train"]["rows"] == 10 and manifest["splits"]["test"]["rows"] == 5
    for split in ("train", "test"):
        assert manifest["splits"][split]["sha256"] == sha256_file(out / f"{split}.parquet")
    printed = capsys.readouterr().out
    assert "train.parquet" in printed and "10 rows" in printed


def test_output_is_byte_identical_across_runs_and_source_formats(tmp_path):
    sources = {
        "dir": [str(FIXTURE)],
        "jsonl": [str(FIXTURE / "jsonl" / "train.jsonl"), str(FIXTURE / "jsonl" / "test.jsonl")],
        "parquet": [str(p) for p in sorted((FIXTURE / "main").glob("*.parquet"))],
        "dir-again": [str(FIXTURE)],
    }
    digests = {}
    for name, source in sources.items():
        out = tmp_path / name
        assert run_cli("--source", *source, "--out", str(out)) == 0
        digests[name] = {f: sha256_file(out / f) for f in ("train.parquet", "test.parquet")}
    assert len({json.dumps(d, sort_keys=True) for d in digests.values()}) == 1
    assert (tmp_path / "dir" / "manifest.json").read_bytes() == (tmp_path / "dir-again" / "manifest.json").read_bytes()


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("So 36 - 7 = 29 pencils.\n#### 29", "29"),
        ("#### 1,500", "1500"),
        ("#### -8", "-8"),
        ("#### 2.5", "2.5"),
        ("#### 5\n#### 6", "5"),  # the first marker, as verl's preprocessing
        ("#### 72 dollars", "72"),
        ("no final line", None),
        ("#### .", None),
        ("#### 1.2.3", None),
        ("####72", None),  # verl's rule needs the space
        ("#### $72", None),
    ],
)
def test_extract_ground_truth(answer, expected):
    assert extract_ground_truth(answer) == expected


@pytest.mark.parametrize("template", ["verl", "think"])
def test_template_and_scorer_agree(tmp_path, template):
    # A response that follows the prompt's instruction must earn reward 1 in the template's scorer mode.
    manifest = write_dataset({"train": fixture_rows("train"), "test": fixture_rows("test")}, tmp_path, template=template)
    assert manifest["template"] == template
    rows = pq.read_table(tmp_path / "train.parquet").to_pylist()
    mode = {"verl": "strict", "think": "think"}[template]
    for row in rows:
        instruction = row["prompt"][0]["content"][len(row["extra_info"]["question"]) + 1 :]
        assert instruction == data.INSTRUCTIONS[template]
        truth = row["reward_model"]["ground_truth"]
        reasoning = row["extra_info"]["answer"].rsplit("####", 1)[0].strip()
        following = f"<think>{reasoning}</think>\n#### {truth}" if template == "think" else f"{reasoning}\n#### {truth}"
        assert compute_score(row["data_source"], following, truth, mode=mode) == 1.0
    if template == "think":
        assert "<think>" in data.INSTRUCTIONS["think"] and "</think>" in data.INSTRUCTIONS["think"]
        # The verl-style answer without the block fails the think format.
        assert compute_score("openai/gsm8k", "#### 29", "29", mode="think") == 0.0


BAD_ROWS = [
    ({"answer": "#### 5"}, "field 'question'"),
    ({"question": "", "answer": "#### 5"}, "field 'question'"),
    ({"question": "   ", "answer": "#### 5"}, "field 'question'"),
    ({"question": None, "answer": "#### 5"}, "field 'question'"),
    ({"question": "q?"}, "field 'answer'"),
    ({"question": "q?", "answer": None}, "field 'answer'"),
    ({"question": "q?", "answer": "It is 5."}, "field 'answer'"),
    ({"question": "q?", "answer": "#### ."}, "field 'answer'"),
]


@pytest.mark.parametrize(("bad", "field"), BAD_ROWS)
def test_bad_row_names_split_row_and_field(tmp_path, bad, field):
    good = {"question": "What is 2 + 3?", "answer": "2 + 3 = 5\n#### 5"}
    rows = {"train": [good, good, bad, good], "test": [good]}
    with pytest.raises(RecipeError) as err:
        write_dataset(rows, tmp_path / "out")
    assert err.value.where == f"split 'train', row 2, {field}"
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())

    manifest = write_dataset(rows, tmp_path / "skipped", skip_bad=True)
    assert manifest["splits"]["train"]["rows"] == 3
    assert manifest["splits"]["train"]["skipped_bad"] == 1
    assert manifest["splits"]["train"]["skipped_bad_rows"] == [2]
    indices = [r["extra_info"]["index"] for r in pq.read_table(tmp_path / "skipped" / "train.parquet").to_pylist()]
    assert indices == [0, 1, 3]  # the input row index is kept


def test_bad_fixture_via_cli_fails_and_leaves_previous_output(tmp_path, capsys):
    out = tmp_path / "gsm8k"
    assert run_cli("--source", str(FIXTURE), "--out", str(out)) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert run_cli("--source", str(FIXTURE / "bad"), "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert "split 'train', row 1, field 'answer'" in err
    assert "--skip-bad" in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # untouched, no temp files

    assert run_cli("--source", str(FIXTURE / "bad"), "--out", str(out), "--skip-bad", "--json") == 0
    manifest = json.loads(capsys.readouterr().out)
    assert manifest["splits"]["train"]["skipped_bad_rows"] == [1, 2, 4]
    assert manifest["splits"]["test"]["skipped_bad_rows"] == [1]
    assert (manifest["splits"]["train"]["rows"], manifest["splits"]["test"]["rows"]) == (2, 1)


def test_failure_while_writing_leaves_no_partial_parquet(tmp_path, monkeypatch):
    real = data._write_parquet
    calls = []

    def fail_on_second(rows, path):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(rows, path)

    monkeypatch.setattr(data, "_write_parquet", fail_on_second)
    out = tmp_path / "out"
    with pytest.raises(OSError, match="No space left"):
        write_dataset({"train": fixture_rows("train"), "test": fixture_rows("test")}, out)
    assert sorted(os.listdir(out)) == []  # neither the written train.parquet nor any temporary


def test_prompt_length_filter_matches_chat_template_lengths(tmp_path, capsys):
    from support.tinytok import build_tokenizer
    from transformers import AutoTokenizer

    tok_dir = build_tokenizer(tmp_path / "tok")
    tok = AutoTokenizer.from_pretrained(tok_dir)
    rows = fixture_rows("train")
    lengths = [
        len(tok.apply_chat_template([{"role": "user", "content": f"{r['question']} {VERL_INSTRUCTION}"}], add_generation_prompt=True))
        for r in rows
    ]
    limit = sorted(lengths)[len(lengths) // 2]
    expected_kept = [i for i, n in enumerate(lengths) if n <= limit]
    assert 0 < len(expected_kept) < len(rows)

    out = tmp_path / "out"
    argv = ["--source", str(FIXTURE), "--out", str(out), "--tokenizer", str(tok_dir), "--max-prompt-length", str(limit)]
    assert run_cli(*argv) == 0
    printed = capsys.readouterr().out
    kept = [r["extra_info"]["index"] for r in pq.read_table(out / "train.parquet").to_pylist()]
    assert kept == expected_kept
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["splits"]["train"]["dropped_too_long"] == len(rows) - len(expected_kept)
    assert manifest["max_prompt_length"] == limit
    assert f"dropped too long {len(rows) - len(expected_kept)}" in printed


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tokenizer", "/nonexistent"], "--tokenizer and --max-prompt-length go together"),
        (["--max-prompt-length", "100"], "--tokenizer and --max-prompt-length go together"),
        (["--source", "/nonexistent/gsm8k-dir"], "source not found"),
        (["--source", str(FIXTURE / "README.md")], "data files must all be .jsonl/.json or all .parquet"),
        (["--source", str(FIXTURE / "jsonl" / "train.jsonl")], "no 'test' split"),
    ],
)
def test_bad_arguments_exit_2(tmp_path, capsys, argv, message):
    args = ["--out", str(tmp_path / "out"), *argv]
    if "--source" not in argv:
        args = ["--source", str(FIXTURE), *args]
    assert run_cli(*args) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_write_dataset_api_for_other_stages(tmp_path):
    # The smoke-assets stage writes synthetic problems through this function.
    rows = {
        "train": [{"question": f"What is {i} + {i}?", "answer": f"{i} + {i} = {2 * i}\n#### {2 * i}"} for i in range(8)],
        "test": [{"question": "What is 1 + 1?", "answer": "#### 2"}],
    }
    manifest = write_dataset(rows, tmp_path, template="verl", source="synthetic")
    assert manifest["source"] == "synthetic"
    assert {s: i["rows"] for s, i in manifest["splits"].items()} == {"train": 8, "test": 1}
    assert json.loads((tmp_path / "manifest.json").read_text()) == manifest
    assert pq.read_table(tmp_path / "train.parquet").column("reward_model").to_pylist()[3]["ground_truth"] == "6"


VERL_DATASET_CODE = r"""
import json, sys
from omegaconf import OmegaConf
from transformers import AutoTokenizer
from verl.utils.dataset.rl_dataset import RLHFDataset
tok = AutoTokenizer.from_pretrained(sys.argv[1])
out = {}
for limit in (int(sys.argv[3]), 1024):
    cfg = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": limit, "truncation": "error",
                            "filter_overlong_prompts": True, "filter_overlong_prompts_workers": 1,
                            "return_raw_chat": True, "cache_dir": sys.argv[4]})
    ds = RLHFDataset(data_files=[sys.argv[2]], tokenizer=tok, config=cfg)
    item = ds[0]
    out[str(limit)] = {
        "len": len(ds),
        "ground_truth": item["reward_model"]["ground_truth"],
        "data_source": item["data_source"],
        "raw_prompt": [dict(m) for m in item["raw_prompt"]],
        "input_ids": item["input_ids"].shape[-1] if "input_ids" in item else None,
        "text": tok.decode(item["input_ids"][item["attention_mask"].bool()]) if "input_ids" in item else None,
        "index": item.get("index"),
    }
print("RESULT" + json.dumps(out))
"""


@pytest.mark.verl
@pytest.mark.parametrize("version", ["0.5.0", "0.8.0"])
def test_verl_rlhf_dataset_loads_and_tokenizes(run_in_verl, tmp_path, version):
    """What a new user does: `make data` on a local GSM8K-shaped dataset, then verl reads the files."""
    from support.tinytok import build_tokenizer
    from transformers import AutoTokenizer

    tok_dir = build_tokenizer(tmp_path / "tok")
    out = tmp_path / "gsm8k"
    assert run_cli("--source", str(FIXTURE), "--out", str(out)) == 0
    rows = pq.read_table(out / "train.parquet").to_pylist()
    tok = AutoTokenizer.from_pretrained(tok_dir)
    lengths = [len(tok.apply_chat_template(r["prompt"], add_generation_prompt=True)) for r in rows]
    limit = sorted(lengths)[len(lengths) // 2]

    code = "import runpy, sys; sys.argv = ['x'] + " + repr(
        [str(tok_dir), str(out / "train.parquet"), str(limit), str(tmp_path / "verl-cache")]
    ) + f"; exec({VERL_DATASET_CODE!r})"
    proc = run_in_verl(version, code, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.split("RESULT", 1)[1])

    full = result["1024"]
    assert full["len"] == 10
    assert full["ground_truth"] == "29"
    assert full["data_source"] == "openai/gsm8k"
    assert full["raw_prompt"] == rows[0]["prompt"]
    if version == "0.5.0":  # 0.5.0 tokenizes in __getitem__ (left-padded to max_prompt_length)
        assert full["input_ids"] == 1024
        assert rows[0]["extra_info"]["question"] in full["text"]
        assert full["text"].endswith("<|im_start|>assistant\n")
    # verl's own overlong-prompt filter keeps exactly the rows our --max-prompt-length would keep.
    assert result[str(limit)]["len"] == sum(n <= limit for n in lengths)


def test_hub_id_source_loads_config_main(tmp_path, monkeypatch):
    # No hub here: stand in for the download and check what the stage asks `datasets` for.
    import datasets

    calls = []
    local = datasets.load_dataset(str(FIXTURE), "main")

    def fake_load_dataset(path, name=None, **kwargs):
        calls.append((path, name))
        return local

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    assert run_cli("--source", "openai/gsm8k", "--out", str(tmp_path / "hub")) == 0
    assert calls == [("openai/gsm8k", "main")]
    assert json.loads((tmp_path / "hub" / "manifest.json").read_text())["source"] == "openai/gsm8k"

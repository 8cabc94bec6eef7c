"""The shared GSM8K scorer: literal cases per mode, normalisation, pathological inputs, verl's calls."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rlrecipes.rewards import gsm8k
from rlrecipes.rewards.gsm8k import compute_score, extract_answer, normalize_number

REPO = Path(__file__).resolve().parents[2]
SCORER = REPO / "rlrecipes" / "rewards" / "gsm8k.py"


@pytest.fixture(autouse=True)
def _cold_caches():
    """Each test sees the scorer as a fresh process does: the digit-folding table fills lazily and
    normalize_number is memoised, so a result cached by an earlier test would hide a bug in the code
    that computes it (mutation testing found exactly that)."""
    gsm8k._FOLD.clear()
    getattr(gsm8k.normalize_number, "cache_clear", lambda: None)()
    yield


def score(response: str, truth: str, mode: str, **kw) -> float:
    return compute_score("openai/gsm8k", response, truth, mode=mode, **kw)


# Text or markup between the marker and the number: verl's strict regex `#### (\-?[0-9\.\,]+)` and
# lm-eval's strict-match need the number right after `#### `, so both give 0 (the real scorers give
# these values in test_rewards_agreement.py::test_strict_literal_cases_match_the_references).
TEXT_AFTER_MARK = [
    ("#### The answer is 72", "72"),
    ("#### answer: 72", "72"),
    ("#### = 72", "72"),
    ("#### x = 72", "72"),
    ("#### ~72", "72"),
    ("#### (72)", "72"),
    ("#### **72**", "72"),
    ("####\n72", "72"),
    ("#### 5\nActually it is 72", "72"),
]

# (response, ground truth) pairs that must score 1.0 in strict mode.
STRICT_POSITIVE = [
    ("#### 72", "72"),
    ("Natalia sold 48/2 = 24 clips in May.\nShe sold 48+24 = 72 clips.\n#### 72", "72"),
    ("#### 1,000", "1000"),  # thousands comma in the response
    ("#### 1000", "1,000"),  # ... or in the ground truth
    ("#### 1,234,567", "1234567"),
    ("#### $72", "72"),  # dollar sign
    ("#### $1,500.00", "1500"),
    ("#### 72.", "72"),  # trailing period
    ("#### 72.0", "72"),  # 72.0 vs 72
    ("#### 72", "72.0"),
    ("#### 72.50", "72.5"),
    ("#### +72", "72"),  # leading plus
    ("#### -8", "-8"),  # negative
    ("#### -$8", "-8"),
    ("#### $-8", "-8"),
    ("#### \u22128", "-8"),  # U+2212 MINUS SIGN
    ("#### -0", "0"),
    ("#### 007", "7"),
    ("#### 0.5", "0.5"),
    ("####72", "72"),  # no space after the marker
    ("####   72", "72"),
    ("#### \u0667\u0662", "72"),  # Arabic-Indic digits
    ("#### \uff17\uff12", "72"),  # fullwidth digits
    ("#### 5\nWait, that is wrong.\n#### 72", "72"),  # the last marked answer counts
    ("#### 72\n\nQuestion: Tom has 5 apples.", "72"),  # text after the answer
    ("#### 72 #### the end", "72"),  # a later marker without a number is ignored
    ("#### 72", 72),  # a non-string ground truth
]
STRICT_NEGATIVE = [
    ("The answer is 72", "72"),  # no marker
    ("72", "72"),
    ("#### 71", "72"),
    ("#### -72", "72"),
    ("#### 72", "-72"),
    ("#### 72.5", "72"),
    ("#### 7 2", "72"),
    ("#### 72 and then #### 5", "72"),
    ("#### seventy-two", "72"),
    ("72 ####", "72"),
    ("# ### 72", "72"),
    ("The 72", "72"),  # no marker at all: the number is not read from just after where one would be
    ("abc72", "72"),
    ("", "72"),
    ("#### 10000", "1000"),
    *TEXT_AFTER_MARK,
]

FLEXIBLE_POSITIVE = [
    ("The answer is 72", "72"),
    ("So she has 72 apples.", "72"),
    ("So she has 72.", "72"),  # trailing period
    ("72.0 apples in total", "72"),
    ("It costs $1,234.", "1234"),
    ("+72", "72"),
    ("x = -8", "-8"),
    ("x=-8", "-8"),
    ("first 5, then 12, finally 72", "72"),
    ("#### 72 dollars", "72"),
    ("\u0667\u0662", "72"),
    ("the difference is 20-5", "5"),  # a '-' after a digit is a subtraction, not a sign
    ("pages 1-5", "5"),  # ... also after a single digit
    ("the change is -$8", "-8"),  # a sign before the dollar
    ("Total: 3.50", "3.5"),
]
FLEXIBLE_NEGATIVE = [
    ("no digits here", "72"),
    ("72 then 5", "72"),
    ("the difference is 20-5", "-5"),
    ("COVID-19", "-19"),
    ("#### 72 (that took 3 steps)", "72"),
    ("", "0"),
]

THINK_POSITIVE = [
    ("<think>48/2 = 24 and 48+24 = 72</think>\n#### 72", "72"),
    ("  <think>\nreasoning\n</think>The answer:\n#### $72.", "72"),
    ("<think>a</think>#### 1,000", "1000"),
    ("<think>first 5 then 72</think> #### -3", "-3"),
]
THINK_NEGATIVE = [
    ("#### 72", "72"),  # no think block
    ("<think></think> #### 72", "72"),  # empty reasoning
    ("<think>   </think> #### 72", "72"),
    ("<think>a</think> 72", "72"),  # no #### after the block
    ("<think>#### 72</think> the answer is above", "72"),  # the answer only inside the block
    ("<think>a</think><think>b</think>#### 72", "72"),  # two blocks
    ("<think>a #### 72", "72"),  # never closed
    ("Sure. <think>a</think>#### 72", "72"),  # text before the block
    ("<think>a</think>#### 71", "72"),
    ("</think><think>a</think>#### 72", "72"),
]

CASES = (
    [("strict", r, t, 1.0) for r, t in STRICT_POSITIVE]
    + [("strict", r, t, 0.0) for r, t in STRICT_NEGATIVE]
    + [("flexible", r, t, 1.0) for r, t in FLEXIBLE_POSITIVE]
    + [("flexible", r, t, 0.0) for r, t in FLEXIBLE_NEGATIVE]
    + [("think", r, t, 1.0) for r, t in THINK_POSITIVE]
    + [("think", r, t, 0.0) for r, t in THINK_NEGATIVE]
)


@pytest.mark.parametrize(("mode", "response", "truth", "expected"), CASES)
def test_literal_cases(mode, response, truth, expected):
    assert score(response, truth, mode) == expected
    assert isinstance(score(response, truth, mode), float)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("72", "72"),
        ("1,000", "1000"),
        ("$1,000.00", "1000"),
        ("72.", "72"),
        ("72.0", "72"),
        ("+72", "72"),
        ("-72", "-72"),
        ("-0.0", "0"),
        ("0.50", "0.5"),
        ("  18 ", "18"),
        ("\u0661\u0668", "18"),
        ("abc", None),
        ("", None),
        (".", None),
        ("1.2.3", None),
        ("72 apples", None),
    ],
)
def test_normalize_number(text, expected):
    assert normalize_number(text) == expected


# Pathological strings: no hang, no exception (int() refuses > 4300 digits; we never call it).
HUGE = "9" * 100_000
PATHOLOGICAL = [
    ("strict", "1" * 100_000, "72", 0.0),
    ("flexible", "1" * 100_000, "72", 0.0),
    ("think", "1" * 100_000, "72", 0.0),
    ("strict", "#### " + HUGE, HUGE, 1.0),
    ("flexible", "The answer is " + HUGE + ".", HUGE, 1.0),
    ("strict", "#" * 100_000, "72", 0.0),
    ("strict", "#### x " * 20_000 + "#### 72", "72", 1.0),
    ("strict", "#### 72 " + "#### x " * 20_000, "72", 1.0),
    ("flexible", "1," * 50_000, "72", 0.0),
    ("flexible", "." * 100_000, "72", 0.0),
    ("flexible", "-" * 100_000 + "72", "-72", 1.0),
    ("strict", "no digits at all, just words " * 3000, "72", 0.0),
    ("flexible", "no digits at all, just words " * 3000, "72", 0.0),
    ("flexible", "\u0663" * 50_000, "72", 0.0),  # 50k Arabic-Indic threes
    ("think", "<think>" * 20_000 + "</think>#### 72", "72", 0.0),
    ("think", "<think>" + "x" * 100_000 + "</think>#### 72", "72", 1.0),
]


@pytest.mark.parametrize(("mode", "response", "truth", "expected"), PATHOLOGICAL, ids=range(len(PATHOLOGICAL)))
def test_pathological_inputs(mode, response, truth, expected):
    assert score(response, truth, mode) == expected


def test_return_dict_has_consistent_scalar_types():
    # verl stacks every key across the batch into one array: same keys, same types, strings for pred.
    results = [
        score("#### 72", "72", "strict", return_dict=True),
        score("no answer", "72", "strict", return_dict=True),
        score("<think>a</think>#### 71", "72", "think", return_dict=True),
        score("the answer is 72", "72", "think", return_dict=True),
        score("1" * 1000, "72", "flexible", return_dict=True),
    ]
    assert results[0] == {"score": 1.0, "acc": 1.0, "format": 1.0, "pred": "72"}
    assert results[1] == {"score": 0.0, "acc": 0.0, "format": 0.0, "pred": ""}
    assert results[2] == {"score": 0.0, "acc": 0.0, "format": 1.0, "pred": "71"}
    assert results[3] == {"score": 0.0, "acc": 0.0, "format": 0.0, "pred": ""}
    assert results[4]["pred"] == "1" * 64  # capped for logging
    for r in results:
        assert list(r) == ["score", "acc", "format", "pred"]
        assert [type(v) for v in r.values()] == [float, float, float, str]


def test_think_mode_reports_right_answer_in_wrong_format():
    # Logged separately (acc) so a run can see "knows the answer, ignores the format".
    assert score("#### 72", "72", "think", return_dict=True) == {"score": 0.0, "acc": 1.0, "format": 0.0, "pred": "72"}


@pytest.mark.parametrize(
    ("mode", "response", "expected"),
    [
        ("strict", "#### 71", 0.1),
        ("strict", "the answer is 71", 0.0),
        ("strict", "#### 72", 1.0),
        ("think", "<think>a</think>#### 71", 0.1),
        ("think", "#### 71", 0.0),
        ("flexible", "71", 0.1),
    ],
)
def test_format_score(mode, response, expected):
    assert score(response, "72", mode, format_score=0.1) == expected


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="unknown GSM8K scoring mode 'strcit'; choose from: strict, flexible, think$"):
        score("#### 72", "72", "strcit")
    assert extract_answer("#### 72") == ("72", True)  # strict is the default mode
    assert extract_answer("The answer is 72") == (None, False)
    # a response that is not a string (a number from a JSON dump) is scored as its text
    assert compute_score("openai/gsm8k", 72, "72", mode="flexible") == 1.0
    assert compute_score("openai/gsm8k", 71, "72", mode="flexible") == 0.0
    with pytest.raises(TypeError, match="mdoe"):
        compute_score("openai/gsm8k", "#### 72", "72", mdoe="think")
    with pytest.raises(ValueError, match="not a number"):
        compute_score("openai/gsm8k", "#### 72", None)
    with pytest.raises(ValueError, match="unknown GSM8K scoring mode 'exact'; choose from: strict, flexible, think$"):
        extract_answer("#### 72", "exact")


def test_verl_0_8_reward_loop_kwargs_are_accepted():
    # verl 0.8's reward loop adds these when a reward model router is configured.
    assert compute_score(
        "openai/gsm8k", "#### 72", "72", {}, reward_router_address="127.0.0.1:1", reward_model_tokenizer=object()
    ) == 1.0


def test_loads_standalone_by_path_with_stdlib_only():
    # verl imports the file by path; it must not need the package or any third-party module.
    code = textwrap.dedent(
        f"""
        import importlib.util, json, sys
        before = set(sys.modules)
        spec = importlib.util.spec_from_file_location("custom_module", {str(SCORER)!r})
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        new = sorted({{m.split(".")[0] for m in set(sys.modules) - before}} - set(sys.stdlib_module_names))
        print(json.dumps({{"third_party": new, "score": mod.compute_score("x", "#### 72", "72", mode="strict")}}))
        """
    )
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, cwd="/", check=True)
    assert json.loads(out.stdout) == {"third_party": [], "score": 1.0}


def test_module_source_has_no_package_imports():
    spec = importlib.util.spec_from_file_location("scorer_by_path", SCORER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.compute_score("x", "#### 72", "72") == gsm8k.compute_score("x", "#### 72", "72") == 1.0
    assert "rlrecipes" not in SCORER.read_text().split('"""', 2)[2]


# verl's own reward managers call the scorer: the float form and the dict form (reward_kwargs
# return_dict) must both come through, in 0.5.0 (P40 image) and 0.8.0 (A100 image).
VERL_MANAGER_CODE = r"""
import json, sys
import numpy as np, torch
from omegaconf import OmegaConf
from transformers import AutoTokenizer
from verl import DataProto
from verl.trainer.ppo.reward import get_custom_reward_fn
from verl.workers.reward_manager.naive import NaiveRewardManager

tok = AutoTokenizer.from_pretrained(sys.argv[1])
scorer, version, mode, return_dict = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] == "1"
fn_cfg = {"path": scorer, "name": "compute_score", "reward_kwargs": {"mode": mode, "return_dict": return_dict}}
cfg = OmegaConf.create({"custom_reward_function": fn_cfg, "reward": {"custom_reward_function": fn_cfg}})
fn = get_custom_reward_fn(cfg)
responses = json.loads(sys.argv[6])
prompt = tok("What is 48 + 24?", add_special_tokens=False)["input_ids"]
resp_ids = [tok(r, add_special_tokens=False)["input_ids"] for r in responses]
width = max(len(r) for r in resp_ids)
pad = tok.pad_token_id
responses_t = torch.tensor([r + [pad] * (width - len(r)) for r in resp_ids])
prompts_t = torch.tensor([prompt] * len(responses))
mask = torch.tensor([[1] * len(prompt) + [1] * len(r) + [0] * (width - len(r)) for r in resp_ids])
data = DataProto.from_dict(
    tensors={"prompts": prompts_t, "responses": responses_t, "attention_mask": mask},
    non_tensors={
        "data_source": np.array(["openai/gsm8k"] * len(responses), dtype=object),
        "reward_model": np.array([{"ground_truth": "72", "style": "rule"}] * len(responses), dtype=object),
        "extra_info": np.array([{"index": i, "split": "test"} for i in range(len(responses))], dtype=object),
    },
)
manager = NaiveRewardManager(tokenizer=tok, num_examine=0, compute_score=fn)
out = manager(data, return_dict=True)
rewards = out["reward_tensor"].sum(-1).tolist()
extra = {k: list(v) for k, v in out["reward_extra_info"].items()}
loop_results = None
if version != "0.5.0":
    # verl >= 0.7 trains through the async reward loop; its naive manager calls the scorer per sample.
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager as LoopManager

    loop_manager = LoopManager(config=cfg, tokenizer=tok, compute_score=fn)
    loop_results = []
    for i in range(len(data)):
        out_i = loop_manager.loop.run_until_complete(loop_manager.run_single(data[i : i + 1]))
        loop_results.append({"score": float(out_i["reward_score"]), "extra": dict(out_i["reward_extra_info"])})
print("RESULT" + json.dumps({"rewards": rewards, "extra": extra, "loop": loop_results}))
"""

VERL_RESPONSES = [
    "<think>48 + 24 = 72</think>\n#### 72",
    "48 + 24 = 72\n#### 72",
    "<think>48 + 24 = 71</think>\n#### 71",
    "I do not know.",
]


@pytest.mark.verl
@pytest.mark.parametrize("version", ["0.5.0", "0.8.0"])
@pytest.mark.parametrize(
    ("mode", "return_dict", "expected"),
    [
        ("strict", False, [1.0, 1.0, 0.0, 0.0]),
        ("think", True, [1.0, 0.0, 0.0, 0.0]),
    ],
)
def test_verl_naive_reward_manager_calls_the_scorer(run_in_verl, tmp_path, version, mode, return_dict, expected):
    from support.tinytok import build_tokenizer

    tok_dir = build_tokenizer(tmp_path / "tok", corpus=VERL_RESPONSES)
    script = tmp_path / "manager.py"
    script.write_text(VERL_MANAGER_CODE)
    code = (
        "import runpy, sys; sys.argv = ['manager.py'] + "
        + repr([str(tok_dir), str(SCORER), version, mode, "1" if return_dict else "0", json.dumps(VERL_RESPONSES)])
        + f"; runpy.run_path({str(script)!r}, run_name='__main__')"
    )
    proc = run_in_verl(version, code, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.split("RESULT", 1)[1])
    assert result["rewards"] == expected
    if return_dict:
        assert result["extra"]["score"] == expected
        assert result["extra"]["acc"] == [1.0, 1.0, 0.0, 0.0]
        assert result["extra"]["format"] == [1.0, 0.0, 1.0, 0.0]
        assert result["extra"]["pred"] == ["72", "72", "71", ""]
    else:
        assert result["extra"] == {}
    if version == "0.8.0":
        assert [r["score"] for r in result["loop"]] == expected
        if return_dict:
            assert [r["extra"]["pred"] for r in result["loop"]] == ["72", "72", "71", ""]
        else:
            assert [r["extra"] for r in result["loop"]] == [{"acc": e} for e in expected]


# `rlrecipes score`: saved generations, scored with the same function.
def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_score_cli_lm_eval_samples(tmp_path, capsys):
    from rlrecipes.cli import main

    # lm-eval logs each doc once per filter with the same response; the target is the raw answer.
    docs = [
        ("so #### 72", "a\n#### 72", 1.0, 1.0),
        ("it is 1,000.", "b\n#### 1,000", 0.0, 1.0),
        ("#### 5", "c\n#### 6", 0.0, 0.0),
    ]
    rows = []
    for i, (resp, target, strict, flexible) in enumerate(docs):
        for name, em in (("strict-match", strict), ("flexible-extract", flexible)):
            rows.append({"doc_id": i, "filter": name, "target": target, "resps": [[resp]], "exact_match": em})
    path = _jsonl(tmp_path / "samples_gsm8k.jsonl", rows)
    assert main(["score", str(path), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["responses"] == 3
    assert (result["response_key"], result["ground_truth_key"]) == ("resps", "target")
    assert result["modes"]["strict"]["score"] == pytest.approx(1 / 3)
    assert result["modes"]["flexible"]["score"] == pytest.approx(2 / 3)
    # think: no response has the block (score 0); acc still reports the strictly-marked right answer.
    assert result["modes"]["think"] == {"score": 0.0, "format": 0.0, "acc": pytest.approx(1 / 3)}
    assert result["lm_eval_exact_match"] == {"strict-match": pytest.approx(1 / 3), "flexible-extract": pytest.approx(2 / 3)}


def test_score_cli_verl_dump_and_parquet(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rlrecipes.cli import main

    dump = _jsonl(
        tmp_path / "0.jsonl",
        [{"input": "q", "output": "<think>x</think>#### 72", "gts": "72", "score": 1.0, "step": 0},
         {"input": "q", "output": "#### 71", "gts": "72", "score": 0.0, "step": 0}],
    )
    assert main(["score", str(dump), "--mode", "think"]) == 0
    out = capsys.readouterr().out
    assert "2 responses (output vs gts)" in out
    assert "think         0.5000     0.5000     0.5000" in out
    assert "strict" not in out.split("\n", 2)[2]

    table = pa.Table.from_pylist(
        [{"responses": ["#### 3", "#### 4"], "reward_model": {"ground_truth": "3", "style": "rule"}}]
    )
    pq.write_table(table, tmp_path / "gen.parquet")
    assert main(["score", str(tmp_path / "gen.parquet"), "--json", "--mode", "strict"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["responses"], result["ground_truth_key"]) == (2, "reward_model.ground_truth")
    assert result["modes"] == {"strict": {"score": 0.5, "acc": 0.5, "format": 1.0}}


@pytest.mark.parametrize(
    ("content", "argv", "message"),
    [
        ('{"output": "#### 1"}\n', [], "no ground truth field found"),
        ('{"output": "#### 1", "gts": "1"}\nnot json\n', [], ":2: invalid JSON"),
        ('{"output": "#### 1", "gts": "one"}\n', [], "record 0, field 'gts': ground truth 'one' is not a number"),
        ('{"output": "#### 1", "gts": "1"}\n', ["--response-key", "text"], "response key 'text' not found"),
        ("", [], "no records"),
    ],
)
def test_score_cli_bad_input_exit_2(tmp_path, capsys, content, argv, message):
    from rlrecipes.cli import main

    path = tmp_path / "gen.jsonl"
    path.write_text(content)
    assert main(["score", str(path), *argv]) == 2
    assert message in capsys.readouterr().err


# canary-dapo: verl's DAPO reward manager (the reward loop's, 0.8.0 and 0.9.1) calls this project's scorer with the
# recipe's own reward.reward_kwargs, keeps the score as `acc` and adds the overlong penalty on top.
DAPO_MANAGER_CODE = r"""
import json, sys
import numpy as np, torch
from omegaconf import OmegaConf
from transformers import AutoTokenizer
from verl import DataProto
from verl.trainer.ppo.reward import get_custom_reward_fn
from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls

tok = AutoTokenizer.from_pretrained(sys.argv[1])
scorer, kwargs, manager_name = sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
fn_cfg = {"path": scorer, "name": "compute_score"}
cfg = OmegaConf.create({"custom_reward_function": fn_cfg, "reward": {"custom_reward_function": fn_cfg,
                                                                       "reward_kwargs": kwargs}})
manager = get_reward_manager_cls(manager_name)(config=cfg, tokenizer=tok, compute_score=get_custom_reward_fn(cfg))
prompt = tok("What is 48 + 24?", add_special_tokens=False)["input_ids"]
out = []
for response in json.loads(sys.argv[5]):
    ids = tok(response, add_special_tokens=False)["input_ids"]
    data = DataProto.from_dict(
        tensors={"prompts": torch.tensor([prompt]), "responses": torch.tensor([ids]),
                 "attention_mask": torch.ones(1, len(prompt) + len(ids), dtype=torch.long)},
        non_tensors={"data_source": np.array(["openai/gsm8k"], dtype=object),
                     "reward_model": np.array([{"ground_truth": "72", "style": "rule"}], dtype=object),
                     "extra_info": np.array([{"index": 0, "split": "train"}], dtype=object)})
    result = manager.loop.run_until_complete(manager.run_single(data))
    out.append({"tokens": len(ids), "reward": float(result["reward_score"]),
                "acc": float(result["reward_extra_info"]["acc"])})
print("RESULT" + json.dumps({"class": type(manager).__name__, "results": out}))
"""


@pytest.mark.verl
@pytest.mark.parametrize("version", ["0.8.0", "0.9.1"])
def test_verl_dapo_reward_manager_punishes_overlong_answers_with_the_canary_settings(run_in_verl, tmp_path, version):
    from rlrecipes.recipe.load import resolve
    from support.tinytok import build_tokenizer

    run = resolve("canary-dapo", profile="any-1gpu-vllm" if version == "0.8.0" else "any-1gpu-hopper",
                  env={"WANDB_API_KEY": ""})
    kwargs = run.get("reward.reward_kwargs")
    buffer = kwargs["overlong_buffer_cfg"]
    short, wrong = "48 + 24 = 72\n#### 72", "48 + 24 = 71\n#### 71"
    long = " ".join(["48 + 24 = 72."] * 12) + "\n#### 72"  # 65-80 tokens: inside the buffer
    tok_dir = build_tokenizer(tmp_path / "tok", corpus=[short, wrong, long])
    script = tmp_path / "dapo.py"
    script.write_text(DAPO_MANAGER_CODE)
    argv = [str(tok_dir), str(SCORER), json.dumps(kwargs), run.get("reward.reward_manager.name"),
            json.dumps([short, wrong, long])]
    proc = run_in_verl(version, f"import runpy, sys; sys.argv = ['dapo.py'] + {argv!r}; "
                                f"runpy.run_path({str(script)!r}, run_name='__main__')", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.split("RESULT", 1)[1])
    assert result["class"] == "DAPORewardManager"
    (s, w, lo) = result["results"]
    expected_len = kwargs["max_resp_len"] - buffer["len"]  # 64: canary-grpo-lora's cap goes unpunished
    assert s["tokens"] <= expected_len and (s["reward"], s["acc"]) == (1.0, 1.0)
    assert w["tokens"] <= expected_len and (w["reward"], w["acc"]) == (0.0, 0.0)
    # a right answer past the buffer's start: acc stays 1, the reward falls linearly with the excess
    assert expected_len < lo["tokens"] <= kwargs["max_resp_len"] and lo["acc"] == 1.0, lo
    penalty = min(-(lo["tokens"] - expected_len) / buffer["len"] * buffer["penalty_factor"], 0)
    assert penalty < 0 and lo["reward"] == pytest.approx(1.0 + penalty)

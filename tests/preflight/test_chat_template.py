"""Preflight's chat-template renderer (rlrecipes.preflight.chat) against transformers' own
`apply_chat_template`, the call verl makes, on every template we ship or test: Qwen2.5-Instruct's and
Qwen3's (tests/fixtures/chat_templates, written out: no downloads), one with `{% generation %}`, one with
`strftime_now`, one that reads every special token, the smoke assets' and the test tokenizer's -- with and
without verl 0.8's `data.apply_chat_template_kwargs`. What the fast path cannot promise goes to transformers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlrecipes.preflight.chat import ChatTokenizer, compile_template, template_kwargs

# one xdist worker runs this module: its module fixtures are built once (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("preflight/test_chat_template")

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = REPO / "tests" / "fixtures" / "chat_templates"

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
           "<tool_response>", "</tool_response>", "<s>", "</s>", "<unk>", "<sep>", "<cls>", "<mask>",
           "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
CORPUS = [
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May.",
    "Let's think step by step and output the final answer after \"####\". #### 72",
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant. system user assistant tool",
    "Cutting Knowledge Date: December 2023 Today Date: 01 Dec 2026 ipython",
    "# Tools You may call one or more functions {\"name\": \"calc\", \"arguments\": {\"expr\": \"2+2\"}}",
]
# Every token transformers puts in special_tokens_map, so the templates that read them all can render.
ALL_SPECIAL = {"bos_token": "<s>", "eos_token": "<|im_end|>", "unk_token": "<unk>", "sep_token": "<sep>",
               "pad_token": "<|endoftext|>", "cls_token": "<cls>", "mask_token": "<mask>",
               "additional_special_tokens": ["<|im_start|>", "<|im_end|>"]}


def _template(name: str) -> str:
    if name == "smoke-assets":
        from rlrecipes.smoke.assets import CHAT_TEMPLATE
        return CHAT_TEMPLATE
    if name == "tinytok":
        from support.tinytok import CHAT_TEMPLATE
        return CHAT_TEMPLATE
    return (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")


TEMPLATE_NAMES = sorted(p.stem for p in TEMPLATES.glob("*.jinja")) + ["smoke-assets", "tinytok"]

CONVERSATIONS = [
    [{"role": "user", "content": "How many clips did Natalia sell? Let's think step by step."}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}],
    [{"role": "user", "content": "2+2?"},
     {"role": "assistant", "content": "<think>\nadd them\n</think>\n\n#### 4"},
     {"role": "user", "content": "and 3+3? ünïcödé ✓ <b>&amp;</b>"}],
    [{"role": "user", "content": "compute 2+2"},
     {"role": "assistant", "content": "",
      "tool_calls": [{"type": "function", "function": {"name": "calc", "arguments": {"expr": "2+2"}}}]},
     {"role": "tool", "content": "4"},
     {"role": "user", "content": "thanks"}],
]
KWARGS = [{}, {"enable_thinking": False}, {"enable_thinking": True}, {"date_string": "01 Dec 2026"}]


@pytest.fixture(scope="module")
def tokenizer_json(tmp_path_factory) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tok.save(str(path))
    return path


def model_dir(root: Path, tokenizer_json: Path, template: str, config: dict) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "tokenizer.json").write_bytes(tokenizer_json.read_bytes())
    (root / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": template}))
    return root


def qwen_config(tokenizer_json: Path) -> dict:
    """tokenizer_config.json as Qwen2.5-Instruct ships it: Qwen2Tokenizer, bos and unk null, the added
    tokens listed with their ids."""
    vocab = json.loads(tokenizer_json.read_text())["added_tokens"]
    return {"tokenizer_class": "Qwen2Tokenizer", "bos_token": None, "eos_token": "<|im_end|>",
            "pad_token": "<|endoftext|>", "unk_token": None, "model_max_length": 131072,
            "additional_special_tokens": ["<|im_start|>", "<|im_end|>"], "clean_up_tokenization_spaces": False,
            "added_tokens_decoder": {str(t["id"]): {"content": t["content"], "special": True, "lstrip": False,
                                                    "rstrip": False, "normalized": False, "single_word": False}
                                     for t in vocab}}


def reference(path: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))


def assert_same(ours: ChatTokenizer, theirs, kwargs: dict) -> None:
    for add_generation_prompt in (True, False):
        for conv in CONVERSATIONS:
            text = theirs.apply_chat_template(conv, add_generation_prompt=add_generation_prompt, tokenize=False,
                                              **kwargs)
            ids = theirs.apply_chat_template(conv, add_generation_prompt=add_generation_prompt, tokenize=True,
                                             **kwargs)
            assert ours.apply_chat_template([conv], add_generation_prompt, tokenize=False) == [text]
            assert ours.apply_chat_template([conv], add_generation_prompt, tokenize=True) == [list(ids)]


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
@pytest.mark.parametrize("config_kind", ["fast", "qwen"])
def test_fast_path_equals_transformers(tmp_path, tokenizer_json, name, config_kind):
    config = ({"tokenizer_class": "PreTrainedTokenizerFast", **ALL_SPECIAL} if config_kind == "fast"
              else qwen_config(tokenizer_json))
    if name == "every-special-token" and config_kind == "qwen":
        pytest.skip("Qwen's tokenizer sets no bos/sep/cls/mask token: the template cannot render there")
    path = model_dir(tmp_path / "m", tokenizer_json, _template(name), config)
    theirs = reference(path)
    for kwargs in KWARGS:
        ours = ChatTokenizer(path, kwargs)
        assert ours.fast, ours.fallback_reason  # the point: the fast path itself is compared
        assert_same(ours, theirs, kwargs)
        assert ours.fast, ours.fallback_reason  # and it stayed on it


def test_enable_thinking_false_lengthens_qwen3_prompts_as_verl_sees_them(tmp_path, tokenizer_json):
    path = model_dir(tmp_path / "m", tokenizer_json, _template("qwen3"), qwen_config(tokenizer_json))
    conv = [CONVERSATIONS[0]]
    plain = ChatTokenizer(path).apply_chat_template(conv)[0]
    no_think = ChatTokenizer(path, {"enable_thinking": False}).apply_chat_template(conv)[0]
    assert no_think[:len(plain)] == plain and len(no_think) > len(plain)
    text = ChatTokenizer(path, {"enable_thinking": False}).apply_chat_template(conv, tokenize=False)[0]
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


@pytest.mark.parametrize(("case", "reason"), [
    ("class default", "the template reads pad_token, which only the tokenizer class sets"),
    ("added token missing", "is not in tokenizer.json"),
    ("other class", "tokenizer class LlamaTokenizerFastX"),
    ("no tokenizer.json", "no tokenizer.json"),
])
def test_what_the_fast_path_cannot_promise_goes_to_transformers(tmp_path, tokenizer_json, case, reason):
    config = qwen_config(tokenizer_json)
    template = _template("qwen2.5-instruct")
    if case == "class default":  # Qwen2TokenizerFast's own default pad token, unknowable from the files
        del config["pad_token"]
        template = "{{- pad_token }}" + template
    elif case == "added token missing":
        config["added_tokens_decoder"]["600"] = {"content": "<|extra|>", "special": True}
    elif case == "other class":
        config["tokenizer_class"] = "LlamaTokenizerFastX"
    path = model_dir(tmp_path / "m", tokenizer_json, template, config)
    if case == "other class":
        config["tokenizer_class"] = "PreTrainedTokenizerFast"  # what transformers can load, for the reference
        ours = ChatTokenizer(path)
        assert not ours.fast and reason in ours.fallback_reason
        return
    if case == "no tokenizer.json":
        reference(path).save_pretrained(str(tmp_path / "slow"), legacy_format=True)
        path = tmp_path / "slow"
        (path / "tokenizer.json").unlink(missing_ok=True)  # vocab.json + merges.txt only
    ours = ChatTokenizer(path)
    assert not ours.fast and reason in ours.fallback_reason
    assert_same(ours, reference(path), {})


def test_a_template_that_fails_here_is_rendered_by_transformers(tmp_path, tokenizer_json, monkeypatch):
    from rlrecipes.preflight import chat

    path = model_dir(tmp_path / "m", tokenizer_json, _template("qwen3"), qwen_config(tokenizer_json))
    ours = ChatTokenizer(path, {"enable_thinking": False})
    assert ours.fast

    def broken(*args, **kwargs):
        raise RuntimeError("a construct this renderer lacks")

    monkeypatch.setattr(chat._Fast, "render", broken)
    assert_same(ours, reference(path), {"enable_thinking": False})
    assert not ours.fast and "a construct this renderer lacks" in ours.fallback_reason


def test_generation_blocks_compile_and_render_their_content():
    _, template = compile_template(_template("qwen2.5-assistant-mask"))
    text = template.render(messages=CONVERSATIONS[2], add_generation_prompt=False)
    assert "<|im_start|>assistant\n<think>\nadd them\n</think>\n\n#### 4<|im_end|>\n" in text


def test_template_kwargs_come_from_the_run(tmp_path):
    from rlrecipes.recipe.load import resolve

    env = {k: str(tmp_path) for k in ("MODELS_DIR", "DATA_DIR", "CKPT_DIR", "LOG_DIR")}
    run = resolve("qwen2.5-3b-gsm8k-grpo-lora", overrides=["+data.apply_chat_template_kwargs.enable_thinking=false"],
                  env=env)
    assert template_kwargs(run) == {"enable_thinking": False}
    run = resolve("qwen2.5-3b-gsm8k-grpo-lora", overrides=["data.apply_chat_template_kwargs={enable_thinking:false}"],
                  env=env)
    assert template_kwargs(run) == {"enable_thinking": False}
    assert template_kwargs(resolve("qwen2.5-3b-gsm8k-grpo-lora", env=env)) == {}


# ------------------------------------------------------------------------------ preflight checks
def _run_with_model(tmp_path: Path, tokenizer_json: Path, template: str, overrides: list[str]):
    from rlrecipes.data.gsm8k import write_dataset
    from rlrecipes.recipe.load import resolve

    env = {k: str(tmp_path / k.lower()) for k in ("MODELS_DIR", "DATA_DIR", "CKPT_DIR", "LOG_DIR")}
    run = resolve("qwen2.5-3b-gsm8k-grpo-lora", overrides=overrides, env=env)
    model_dir(run.model_path, tokenizer_json, template, qwen_config(tokenizer_json))
    rows = [{"question": "Natalia sold clips to 48 of her friends in April. How many clips?", "answer": "x\n#### 72"}]
    write_dataset({"train": rows, "test": rows}, run.data_dir, source="test")
    return run


def test_preflight_passes_a_generation_template(tmp_path, tokenizer_json):
    from rlrecipes.preflight.checks import Context, check_chat_template

    run = _run_with_model(tmp_path, tokenizer_json, _template("qwen2.5-assistant-mask"), [])
    got = check_chat_template(Context(run, None, None))
    assert got.status == "pass", got.message  # it failed to compile before: '{% generation %}' is an unknown tag


def test_preflight_prompt_length_counts_with_verls_template_kwargs(tmp_path, tokenizer_json):
    import pyarrow.parquet as pq

    from rlrecipes.preflight.checks import Context, check_prompt_length

    run = _run_with_model(tmp_path, tokenizer_json, _template("qwen3"), [])
    prompt = pq.read_table(run.get("data.train_files"), columns=["prompt"]).column("prompt").to_pylist()[0]
    plain = len(ChatTokenizer(run.model_path).apply_chat_template([prompt])[0])
    no_think = len(ChatTokenizer(run.model_path, {"enable_thinking": False}).apply_chat_template([prompt])[0])
    assert no_think > plain
    limit = [f"data.max_prompt_length={plain}", "data.filter_overlong_prompts=false"]
    ok = check_prompt_length(Context(_run_with_model(tmp_path / "a", tokenizer_json, _template("qwen3"), limit),
                                     None, None))
    assert ok.status == "pass", ok.message
    thinking_off = limit + ["+data.apply_chat_template_kwargs.enable_thinking=false"]
    bad = check_prompt_length(Context(_run_with_model(tmp_path / "b", tokenizer_json, _template("qwen3"),
                                                      thinking_off), None, None))
    assert bad.status == "fail" and f"(longest {no_think})" in bad.message

"""A tiny Qwen-style tokenizer built on the spot (no hub): the smoke assets' byte-level BPE builder
(rlrecipes.smoke.assets.build_tokenizer) with a small corpus and Qwen2.5's default system prompt, saved
with save_pretrained.

    from support.tinytok import build_tokenizer
    tok_dir = build_tokenizer(tmp_path / "tok")            # -> Path, loadable with AutoTokenizer
    tok_dir = build_tokenizer(tmp_path / "tok", corpus=[...], vocab_size=300)

Byte-level means every string is encodable (no unknown tokens), so any prompt gets a real length.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from rlrecipes.smoke.assets import SPECIAL_TOKENS as _SPECIAL

# test_preflight writes tokenizer.json without importing transformers (slow here); same tokens.
SPECIAL_TOKENS = list(_SPECIAL)

# Qwen2.5's template without the tool-calling branches: a default system turn, <|im_start|>role ...
# <|im_end|> per message, and the assistant header as the generation prompt.
CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message['role'] != 'system' or not loop.first %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

DEFAULT_CORPUS = [
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May.",
    "How many clips did Natalia sell altogether in April and May?",
    "Let's think step by step and output the final answer after \"####\".",
    "<think> First add the numbers, then subtract. </think> #### 72",
    "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting.",
    "0 1 2 3 4 5 6 7 8 9 10 100 1,000 -8 2.5 = + - * / <<48/2=24>>24",
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant. system user assistant",
]


def build_tokenizer(out_dir: str | Path, corpus: Iterable[str] | None = None, vocab_size: int = 400) -> Path:
    from rlrecipes.smoke.assets import build_tokenizer as train

    out = Path(out_dir)
    train(list(corpus if corpus is not None else DEFAULT_CORPUS), vocab_size, CHAT_TEMPLATE).save_pretrained(str(out))
    return out

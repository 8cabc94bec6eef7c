"""The tokenizer's chat template and a light tokenizer that applies it (for prompt-length checks)."""

from __future__ import annotations

import json
from pathlib import Path


def chat_template(model_dir: Path) -> str | None:
    """The tokenizer's chat template as transformers would find it (tokenizer_config.json or the
    chat_template.jinja / chat_template.json files newer releases write)."""
    jinja = model_dir / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    for name, key in (("chat_template.json", "chat_template"), ("tokenizer_config.json", "chat_template")):
        path = model_dir / name
        if path.is_file():
            try:
                value = json.loads(path.read_text(encoding="utf-8")).get(key)
            except (OSError, ValueError):
                continue
            if isinstance(value, list):  # named templates: transformers uses "default"
                value = next((t.get("template") for t in value if t.get("name") == "default"), None)
            if value:
                return str(value)
    return None


class ChatTokenizer:
    """Counts prompt tokens like `AutoTokenizer.apply_chat_template(..., add_generation_prompt=True)`
    does, with the `tokenizers` library and jinja2 directly: importing transformers costs 8-20 s on a
    small machine, more than the whole preflight may take. Same jinja environment as transformers
    (trim_blocks, lstrip_blocks, loopcontrols, raise_exception, tojson); tests compare it with
    transformers on a real tokenizer."""

    def __init__(self, model_dir: Path):
        import jinja2
        import jinja2.sandbox
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        config = {}
        cfg_path = model_dir / "tokenizer_config.json"
        if cfg_path.is_file():
            config = json.loads(cfg_path.read_text(encoding="utf-8"))

        def raise_exception(message):
            raise jinja2.exceptions.TemplateError(message)

        def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
            return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

        env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                           extensions=["jinja2.ext.loopcontrols"])
        env.filters["tojson"] = tojson
        env.globals["raise_exception"] = raise_exception
        self.template = env.from_string(chat_template(model_dir) or "")
        self.special = {}
        for key in ("bos_token", "eos_token", "pad_token", "unk_token"):
            value = config.get(key)
            if isinstance(value, dict):
                value = value.get("content")
            self.special[key] = value

    def apply_chat_template(self, conversations: list, add_generation_prompt: bool = True,
                            tokenize: bool = True) -> list:
        texts = [self.template.render(messages=list(conv), tools=None, documents=None,
                                      add_generation_prompt=add_generation_prompt, **self.special)
                 for conv in conversations]
        if not tokenize:
            return texts
        return [enc.ids for enc in self.tokenizer.encode_batch(texts, add_special_tokens=False)]


def prompt_token_counts(tok: ChatTokenizer, prompts: list, limit: int) -> tuple[int, int, int]:
    """(prompts over `limit` tokens, total prompts, longest count seen). Byte-level BPE never makes more
    tokens than the text has UTF-8 bytes, so only prompts longer than `limit` bytes are tokenised."""
    texts = tok.apply_chat_template(prompts, add_generation_prompt=True, tokenize=False)
    sizes = [len(t.encode("utf-8")) for t in texts]
    candidates = [t for t, size in zip(texts, sizes) if size > limit]
    counts = [len(e.ids) for e in tok.tokenizer.encode_batch(candidates, add_special_tokens=False)] if candidates else []
    over = sum(1 for n in counts if n > limit)
    return over, len(texts), max(counts, default=0)

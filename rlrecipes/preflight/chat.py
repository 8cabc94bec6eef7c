"""The tokenizer's chat template and a light tokenizer that applies it (for prompt-length checks).

Fast path: the `tokenizers` library and jinja2, configured exactly as transformers renders chat templates
(`transformers/utils/chat_template_utils.py` `_compile_jinja_template` and
`PreTrainedTokenizerBase.apply_chat_template`). Importing transformers costs 5-17 s on a small machine
(it imports torch), more than the rest of preflight together; the fast path imports in ~0.3 s
(docs/preflight.md). Its results must equal `AutoTokenizer.apply_chat_template` (tests/preflight/test_chat_template.py
compares them on every template we ship or test). Whatever it cannot reproduce with certainty -- no
tokenizer.json, a tokenizer class that rewrites its tokenizer at load time, added tokens missing from
tokenizer.json, a special token the template reads that only the tokenizer class's defaults could supply,
a template that does not render here -- goes to transformers itself.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

SPECIAL_TOKENS_ATTRIBUTES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                             "mask_token", "additional_special_tokens")
# Classes whose fast tokenizer is tokenizer.json as saved: AutoTokenizer changes nothing that encoding
# without special tokens sees. Any other class (or an `add_prefix_space` setting, which makes some
# rebuild the tokenizer from the slow one) goes to transformers.
PLAIN_TOKENIZER_CLASSES = {None, "PreTrainedTokenizerFast", "Qwen2Tokenizer", "Qwen2TokenizerFast",
                           "GPT2Tokenizer", "GPT2TokenizerFast", "LlamaTokenizer", "LlamaTokenizerFast"}


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


def compile_template(template: str):
    """A chat template compiled in transformers' environment: sandboxed, trim_blocks + lstrip_blocks,
    loop controls, `{% generation %}` blocks (rendered as their content: assistant masks are not asked
    for), `raise_exception`, `strftime_now`, and a `tojson` that does not escape HTML."""
    import jinja2
    import jinja2.ext
    import jinja2.nodes
    import jinja2.sandbox

    class Generation(jinja2.ext.Extension):
        # transformers' AssistantTracker tracks these blocks for return_assistant_tokens_mask only
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):  # noqa: A002 -- the name templates call it with
        return datetime.now().strftime(format)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env, env.from_string(template)


class FastPathUnavailable(Exception):
    """The fast path cannot promise transformers' result for this model directory."""


def _token_text(value: Any) -> Any:
    if isinstance(value, dict):  # an AddedToken as saved: {"content": ..., "special": ...}
        return value.get("content")
    if isinstance(value, list):
        return [_token_text(v) for v in value]
    return value


class _Fast:
    def __init__(self, model_dir: Path):
        from tokenizers import Tokenizer

        if not (model_dir / "tokenizer.json").is_file():
            raise FastPathUnavailable("no tokenizer.json")
        config: dict = {}
        for name in ("special_tokens_map.json", "tokenizer_config.json"):  # tokenizer_config.json wins
            path = model_dir / name
            if path.is_file():
                try:
                    config.update(json.loads(path.read_text(encoding="utf-8")))
                except (OSError, ValueError) as exc:
                    raise FastPathUnavailable(f"{name} is unreadable: {exc}") from None
        cls = config.get("tokenizer_class")
        if cls not in PLAIN_TOKENIZER_CLASSES:
            raise FastPathUnavailable(f"tokenizer class {cls}")
        if config.get("add_prefix_space") is not None:
            raise FastPathUnavailable("add_prefix_space is set (the tokenizer is rebuilt at load time)")
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        for index, token in (config.get("added_tokens_decoder") or {}).items():
            content = _token_text(token)
            if self.tokenizer.token_to_id(content) != int(index):
                raise FastPathUnavailable(f"added token {content!r} ({index}) is not in tokenizer.json")
        template = chat_template(model_dir)
        if template is None:
            raise FastPathUnavailable("no chat template")
        import jinja2.meta

        env, self.template = compile_template(template)
        used = jinja2.meta.find_undeclared_variables(env.parse(template))
        # transformers passes special_tokens_map: the tokens that are set, as strings
        self.special: dict[str, Any] = {}
        for key in SPECIAL_TOKENS_ATTRIBUTES:
            if key not in config:
                if key in used and cls != "PreTrainedTokenizerFast":
                    raise FastPathUnavailable(f"the template reads {key}, which only the tokenizer class sets")
                continue
            value = _token_text(config[key])
            if value:
                self.special[key] = value

    def render(self, messages: list, add_generation_prompt: bool, kwargs: dict) -> str:
        return self.template.render(messages=messages, tools=None, documents=None,
                                    add_generation_prompt=add_generation_prompt, **{**self.special, **kwargs})

    def encode(self, texts: list[str]) -> list[list[int]]:
        return [enc.ids for enc in self.tokenizer.encode_batch(texts, add_special_tokens=False)]


class ChatTokenizer:
    """Prompts as verl builds them: `tokenizer.apply_chat_template(messages, add_generation_prompt=True,
    **data.apply_chat_template_kwargs)`, then token ids without added special tokens. The fast path when
    it can promise transformers' result, else transformers (`fallback_reason` says why)."""

    def __init__(self, model_dir: Path, template_kwargs: dict | None = None):
        self.model_dir = Path(model_dir)
        self.template_kwargs = dict(template_kwargs or {})
        self.fallback_reason: str | None = None
        self._reference = None
        try:
            self._fast: _Fast | None = _Fast(self.model_dir)
        except FastPathUnavailable as exc:
            self._fast, self.fallback_reason = None, str(exc)

    @property
    def fast(self) -> bool:
        return self._fast is not None

    def _transformers(self):
        if self._reference is None:
            from transformers import AutoTokenizer

            self._reference = AutoTokenizer.from_pretrained(str(self.model_dir))
        return self._reference

    def render(self, conversations: list, add_generation_prompt: bool = True) -> list[str]:
        if self._fast is not None:
            try:
                return [self._fast.render(list(conv), add_generation_prompt, self.template_kwargs)
                        for conv in conversations]
            except Exception as exc:  # noqa: BLE001 -- whatever it is, transformers has the last word
                self._fast, self.fallback_reason = None, f"the template did not render here: {exc}"
        tok = self._transformers()
        return [tok.apply_chat_template(list(conv), add_generation_prompt=add_generation_prompt, tokenize=False,
                                        **self.template_kwargs) for conv in conversations]

    def encode(self, texts: list[str]) -> list[list[int]]:
        if self._fast is not None:
            return self._fast.encode(texts)
        tok = self._transformers()
        return [list(tok(text, add_special_tokens=False)["input_ids"]) for text in texts]

    def apply_chat_template(self, conversations: list, add_generation_prompt: bool = True,
                            tokenize: bool = True) -> list:
        texts = self.render(conversations, add_generation_prompt)
        return self.encode(texts) if tokenize else texts


def template_kwargs(run) -> dict[str, Any]:
    """verl's `data.apply_chat_template_kwargs` (0.8+): variables its dataset passes to the chat template,
    e.g. `enable_thinking: false` for Qwen3. Set as a whole mapping or key by key."""
    from rlrecipes.recipe import overrides as ov

    base = "data.apply_chat_template_kwargs"
    value = run.get(base)
    kwargs = dict(value) if isinstance(value, dict) else {}
    for key, item in run.overrides.items():
        bare = ov.bare_key(key)
        if bare.startswith(base + ".") and not key.startswith("~"):
            kwargs[bare[len(base) + 1:]] = ov.substitute(item, run.variables)
    return kwargs


def prompt_token_counts(tok: ChatTokenizer, prompts: list, limit: int) -> tuple[int, int, int]:
    """(prompts over `limit` tokens, total prompts, longest count seen). Byte-level BPE never makes more
    tokens than the text has UTF-8 bytes, so only prompts longer than `limit` bytes are tokenised."""
    texts = tok.apply_chat_template(prompts, add_generation_prompt=True, tokenize=False)
    sizes = [len(t.encode("utf-8")) for t in texts]
    candidates = [t for t, size in zip(texts, sizes) if size > limit]
    counts = [len(ids) for ids in tok.encode(candidates)] if candidates else []
    over = sum(1 for n in counts if n > limit)
    return over, len(texts), max(counts, default=0)

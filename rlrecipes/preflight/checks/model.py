"""Model and data checks: the model directory (config, weights, tokenizer), its chat template, verl's
parquet columns and prompt lengths in tokens. They read the run's own directories: they are what is
being checked."""

from __future__ import annotations

import json
import os
from pathlib import Path

from rlrecipes.data.model_download import assets_command
from rlrecipes.preflight.chat import ChatTokenizer, chat_template, prompt_token_counts, template_kwargs
from rlrecipes.preflight.checks.base import FAIL, PASS, WARN, Check, Context

WEIGHT_PATTERNS = ("*.safetensors", "*.bin")


def _model_problem(path: Path) -> str:
    if not path.exists():
        return f"{path} does not exist"
    if not path.is_dir():
        return f"{path} is not a directory"
    if not os.access(path, os.R_OK | os.X_OK):
        return f"{path} is not readable"
    config = path / "config.json"
    if not config.is_file():
        return f"{path} has no config.json"
    try:
        json.loads(config.read_text())
    except (OSError, ValueError) as exc:
        return f"{config} is unreadable: {exc}"
    weights = [p for pattern in WEIGHT_PATTERNS for p in path.glob(pattern)]
    if not weights:
        return f"{path} has no weights (*.safetensors or *.bin)"
    for index in path.glob("*.index.json"):
        try:
            files = set(json.loads(index.read_text())["weight_map"].values())
        except (OSError, ValueError, KeyError) as exc:
            return f"{index} is unreadable: {exc}"
        missing = sorted(f for f in files if not (path / f).is_file())
        if missing:
            return f"{path} is missing shards named by {index.name}: {', '.join(missing[:3])}"
    for weight in weights:
        if not os.access(weight, os.R_OK):
            return f"{weight} is not readable"
    if not ((path / "tokenizer.json").is_file() or (path / "vocab.json").is_file()):
        return f"{path} has no tokenizer (tokenizer.json or vocab.json)"
    return ""


def check_model(ctx: Context) -> Check:
    run = ctx.run
    paths = [run.model_path]
    critic = run.get("critic.model.path") if run.use_critic else None
    if critic and Path(str(critic)) != run.model_path:
        paths.append(Path(str(critic)))
    for path in paths:
        problem = _model_problem(path)
        if problem:
            built = assets_command(run)
            fix = (f"{built} (built offline, never downloaded)" if built else
                   f"rlrecipes model {run.name} --models-dir {run.paths['MODELS_DIR']} (make model RECIPE={run.name})")
            return Check("model", FAIL, problem, f"{fix}; or set MODELS_DIR to where it is")
    return Check("model", PASS, f"{', '.join(map(str, paths))}: config, weights and tokenizer readable")


def check_chat_template(ctx: Context) -> Check:
    model = ctx.run.model_path
    if not model.is_dir():
        return Check("chat-template", WARN, "not checked: the model directory is missing", "see the model check")
    template = chat_template(model)
    if template is None:
        return Check("chat-template", FAIL, f"the tokenizer in {model} has no chat template: verl applies it to every "
                     "prompt (apply_chat_template) and fails", "use an -Instruct model, or add chat_template to "
                     "tokenizer_config.json")
    kwargs = template_kwargs(ctx.run)
    tok = ChatTokenizer(model, kwargs)
    try:
        # what verl's dataset does with every prompt (a `{% generation %}` block or strftime_now included)
        tok.render([[{"role": "user", "content": "What is 2 + 2?"}]], add_generation_prompt=True)
    except ImportError as exc:  # the fast path declined and transformers is not here
        return Check("chat-template", WARN, f"not rendered: {tok.fallback_reason}, and transformers is not "
                     f"installed ({exc.name})", "run preflight in the recipe's image")
    except Exception as exc:  # noqa: BLE001 -- transformers' own error: a template verl cannot use
        shown = f" with data.apply_chat_template_kwargs={kwargs}" if kwargs else ""
        return Check("chat-template", FAIL, f"the chat template in {model} fails on a user message{shown}: {exc}",
                     "fix chat_template in tokenizer_config.json (or chat_template.jinja)")
    how = "" if tok.fast else f"; rendered with transformers ({tok.fallback_reason})"
    return Check("chat-template", PASS, f"chat template present ({len(template)} chars), renders a prompt{how}")


DATA_COLUMNS = ("data_source", "prompt", "reward_model")


def _data_problem(path: Path) -> tuple[str, int]:
    if not path.is_file():
        return f"{path} does not exist", 0
    if not os.access(path, os.R_OK):
        return f"{path} is not readable", 0
    import pyarrow.parquet as pq

    try:
        meta = pq.read_metadata(path)
    except Exception as exc:  # pyarrow.ArrowInvalid on a truncated or foreign file
        return f"{path} is not a readable parquet file: {exc}", 0
    names = set(meta.schema.to_arrow_schema().names)
    missing = [c for c in DATA_COLUMNS if c not in names]
    if missing:
        return f"{path} lacks verl's columns {', '.join(missing)} (has {', '.join(sorted(names))})", 0
    if meta.num_rows == 0:
        return f"{path} has no rows", 0
    return "", meta.num_rows


def check_data(ctx: Context) -> Check:
    run = ctx.run
    rows = {}
    for key in ("data.train_files", "data.val_files"):
        value = run.get(key)
        for item in value if isinstance(value, list) else [value]:
            problem, n = _data_problem(Path(str(item)))
            if problem:
                built = assets_command(run)
                fix = (f"{built} (built offline with the model)" if built else
                       f"rlrecipes data {run.recipe.dataset.name} --out {run.data_dir} (make data)")
                return Check("data", FAIL, problem, f"{fix}; or set DATA_DIR to where it is")
            rows[str(item)] = n
    return Check("data", PASS, "; ".join(f"{Path(p).name}: {n} rows" for p, n in rows.items()))


def _prompts(path: Path, column: str) -> list[list[dict]]:
    import pyarrow.parquet as pq

    rows = pq.read_table(path, columns=[column]).column(column).to_pylist()
    return [[{"role": m["role"], "content": m["content"]} for m in row] for row in rows]


def check_prompt_length(ctx: Context) -> Check:
    run = ctx.run
    model = run.model_path
    if not (model / "tokenizer.json").is_file() or chat_template(model) is None:
        return Check("prompt-length", WARN, "not checked: no tokenizer.json with a chat template in the model "
                     "directory", "see the model and chat-template checks")
    limit = run.get("data.max_prompt_length", kind=int)
    column = str(run.get("data.prompt_key"))
    tok = ChatTokenizer(model, template_kwargs(run))
    results = []
    for key in ("data.train_files", "data.val_files"):
        value = run.get(key)
        for item in value if isinstance(value, list) else [value]:
            path = Path(str(item))
            if not path.is_file():
                return Check("prompt-length", WARN, f"not checked: {path} is missing", "see the data check")
            try:
                prompts = _prompts(path, column)
            except Exception as exc:  # wrong column type, unreadable file
                return Check("prompt-length", WARN, f"not checked: cannot read prompts from {path}: {exc}", "")
            try:
                results.append((path, *prompt_token_counts(tok, prompts, limit)))
            except ImportError as exc:
                return Check("prompt-length", WARN, f"not checked: {tok.fallback_reason}, and transformers is "
                             f"not installed ({exc.name})", "run preflight in the recipe's image")
            except Exception as exc:  # noqa: BLE001 -- the chat-template check reports the template's error
                return Check("prompt-length", WARN, f"not checked: the chat template fails: {exc}",
                             "see the chat-template check")
    longest = max((m for *_, m in results), default=0)
    bad = [(p, k, n, m) for p, k, n, m in results if k]
    if not bad:
        shown = f"longest prompt {longest} tokens" if longest else "every prompt is shorter in bytes than the limit"
        return Check("prompt-length", PASS, f"{shown} <= data.max_prompt_length={limit} "
                     f"({sum(n for _, _, n, _ in results)} prompts)")
    detail = "; ".join(f"{p.name}: {k} of {n} prompts > {limit} tokens (longest {m})" for p, k, n, m in bad)
    fix = f"data.max_prompt_length={longest} (and re-check memory), or shorten the prompt template"
    if run.get("data.filter_overlong_prompts"):
        return Check("prompt-length", WARN, f"{detail}; data.filter_overlong_prompts drops them", fix)
    if str(run.get("data.truncation")) == "error":
        return Check("prompt-length", FAIL, f"{detail}; with data.truncation=error verl raises at the first one",
                     fix + ", or data.filter_overlong_prompts=True")
    return Check("prompt-length", WARN, f"{detail}; data.truncation={run.get('data.truncation')} cuts them", fix)

"""GSM8K -> verl parquet: the column layout of verl's examples/data_preprocess/gsm8k.py, deterministic.

Each output row is
    data_source  "openai/gsm8k"
    prompt       [{"content": question + " " + instruction, "role": "user"}]
    ability      "math"
    reward_model {"ground_truth": <number after the first "#### ", commas removed>, "style": "rule"}
    extra_info   {"answer": raw answer, "index": input row index, "question": raw question, "split": split}
with struct fields in the order `datasets` writes them (alphabetical), so the files are
interchangeable with verl's own. The parquet bytes depend only on the rows and the pyarrow version:
one row group, fixed compression, no timestamps; the manifest holds no wall-clock time.

`write_dataset` is the one writer: `rlrecipes data gsm8k` and the smoke-assets stage both use it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rlrecipes.errors import RecipeError
from rlrecipes.fsutil import atomic_path, sha256_file

DATA_SOURCE = "openai/gsm8k"
ABILITY = "math"
SPLITS = ("train", "test")
INSTRUCTIONS = {
    # verl's instruction, verbatim (examples/data_preprocess/gsm8k.py), so the strict scorer matches.
    "verl": 'Let\'s think step by step and output the final answer after "####".',
    # R1-style: reasoning inside <think></think>, then the answer in the same "#### N" form, so the
    # `think` scorer mode can check the format and reuse the strict answer parser.
    "think": (
        "First think through the problem step by step inside <think> </think> tags, "
        'then output the final answer after "####".'
    ),
}
TEMPLATES = tuple(INSTRUCTIONS)
# The regex verl's preprocessing uses for the ground truth; the first match wins, as there.
_GROUND_TRUTH = re.compile(r"#### (\-?[0-9\.\,]+)")
_NUMBER = re.compile(r"-?[0-9][0-9,]*(?:\.[0-9]+)?")
# Rows are converted in memory; past this many a progress bar shows (on a terminal only).
_PROGRESS_MIN_ROWS = 2000


def parquet_schema():
    import pyarrow as pa

    return pa.schema(
        [
            ("data_source", pa.string()),
            ("prompt", pa.list_(pa.struct([("content", pa.string()), ("role", pa.string())]))),
            ("ability", pa.string()),
            ("reward_model", pa.struct([("ground_truth", pa.string()), ("style", pa.string())])),
            (
                "extra_info",
                pa.struct(
                    [("answer", pa.string()), ("index", pa.int64()), ("question", pa.string()), ("split", pa.string())]
                ),
            ),
        ]
    )


def extract_ground_truth(answer: str) -> str | None:
    """The number after the first '#### ' with commas removed (verl's rule), or None if unparsable."""
    match = _GROUND_TRUTH.search(answer)
    if match is None:
        return None
    value = match.group(1).replace(",", "")
    # verl's regex also accepts "." or "1.2.3"; a ground truth the scorer cannot compare is bad data.
    return value if _NUMBER.fullmatch(value) else None


def make_prompt(question: str, template: str) -> str:
    return question + " " + INSTRUCTIONS[template]


class BadRow(RecipeError):
    """A source row without a question or without a parsable '#### answer'."""


def convert_row(row: Mapping[str, Any], split: str, index: int, template: str) -> dict:
    """One GSM8K row ({"question", "answer"}) -> one verl row; BadRow names split, index and field."""
    where = f"split {split!r}, row {index}"
    question = row.get("question")
    if not isinstance(question, str) or not question.strip():
        raise BadRow("missing or empty question", where=f"{where}, field 'question'")
    answer = row.get("answer")
    if not isinstance(answer, str):
        raise BadRow("missing answer", where=f"{where}, field 'answer'")
    truth = extract_ground_truth(answer)
    if truth is None:
        raise BadRow(
            "no parsable '#### <number>' final answer",
            where=f"{where}, field 'answer'",
            hint="GSM8K answers end with a line like '#### 72'; use --skip-bad to drop such rows",
        )
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"content": make_prompt(question, template), "role": "user"}],
        "ability": ABILITY,
        "reward_model": {"ground_truth": truth, "style": "rule"},
        "extra_info": {"answer": answer, "index": index, "question": question, "split": split},
    }


def _progress(rows: list, description: str) -> Iterable:
    if len(rows) < _PROGRESS_MIN_ROWS or not sys.stderr.isatty():
        return rows
    from rich.progress import track

    return track(rows, description=description, transient=True)


def prompt_lengths(tokenizer, rows: list[dict], batch: int = 256) -> list[int]:
    """Prompt tokens after the chat template, counted as verl's RLHFDataset counts them when it
    filters overlong prompts (apply_chat_template(prompt, add_generation_prompt=True))."""
    lengths: list[int] = []
    for start in range(0, len(rows), batch):
        chunk = [row["prompt"] for row in rows[start : start + batch]]
        ids = tokenizer.apply_chat_template(chunk, add_generation_prompt=True, tokenize=True)
        lengths.extend(len(x) for x in ids)
    return lengths


def _load_tokenizer(tokenizer):
    if tokenizer is None or not isinstance(tokenizer, (str, os.PathLike)):
        return tokenizer
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(tokenizer))
    except (OSError, ValueError) as exc:
        raise RecipeError(f"cannot load tokenizer: {exc}", where=str(tokenizer)) from exc


def _write_parquet(rows: list[dict], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(rows, schema=parquet_schema())
    # Fixed writer settings: the bytes depend on the rows (and the pyarrow version) only.
    pq.write_table(
        table,
        path,
        compression="snappy",
        row_group_size=max(1, len(rows)),
        use_dictionary=True,
        write_statistics=True,
        version="2.6",
        data_page_version="1.0",
    )


def write_dataset(
    rows_by_split: Mapping[str, list[Mapping[str, Any]]],
    out_dir: str | os.PathLike,
    template: str = "verl",
    source: str = "unknown",
    tokenizer=None,
    max_prompt_length: int | None = None,
    skip_bad: bool = False,
) -> dict:
    """Write `<split>.parquet` for each split plus `manifest.json` into `out_dir`; return the manifest.

    rows_by_split: {"train": [{"question": str, "answer": "...\\n#### 72"}, ...], "test": [...]}.
    tokenizer: a tokenizer object or a model/tokenizer directory; with max_prompt_length, prompts whose
    chat-templated length exceeds it are dropped and counted. A bad row raises BadRow (exit 2) naming
    split, row index and field, unless skip_bad (then it is counted). All rows are checked before
    anything is written, and each file is renamed into place only after all of them were written, so
    a failure leaves the previous contents of out_dir as they were.
    """
    if template not in INSTRUCTIONS:
        raise RecipeError(f"unknown template {template!r}", where="template", hint=f"choose from: {', '.join(TEMPLATES)}")
    if not rows_by_split:
        raise RecipeError("no splits to write", where=str(source))
    for split in rows_by_split:
        if not re.fullmatch(r"[A-Za-z0-9_-]+", split):
            raise RecipeError(f"split name {split!r} is not a plain file name", where=str(source))
    if (tokenizer is None) != (max_prompt_length is None):
        raise RecipeError(
            "--tokenizer and --max-prompt-length go together",
            where="max_prompt_length" if tokenizer is not None else "tokenizer",
            hint="pass both to drop prompts longer than N tokens after the chat template, or neither",
        )
    if max_prompt_length is not None and max_prompt_length < 1:
        raise RecipeError(f"max prompt length must be positive, got {max_prompt_length}", where="max_prompt_length")
    tok = _load_tokenizer(tokenizer)

    converted: dict[str, list[dict]] = {}
    splits_info: dict[str, dict] = {}
    for split, rows in rows_by_split.items():
        rows = list(rows)
        good: list[dict] = []
        skipped: list[dict] = []
        for index, row in enumerate(_progress(rows, f"converting {split}")):
            try:
                good.append(convert_row(row, split, index, template))
            except BadRow as exc:
                if not skip_bad:
                    raise
                skipped.append({"index": index, "where": exc.where, "error": exc.message})
        too_long = 0
        if tok is not None:
            lengths = prompt_lengths(tok, good)
            kept = [row for row, n in zip(good, lengths) if n <= max_prompt_length]
            too_long = len(good) - len(kept)
            good = kept
        converted[split] = good
        splits_info[split] = {
            "file": f"{split}.parquet",
            "input_rows": len(rows),
            "rows": len(good),
            "skipped_bad": len(skipped),
            "skipped_bad_rows": [s["index"] for s in skipped],
            "dropped_too_long": too_long,
        }
        if not good:
            raise RecipeError(
                f"split {split!r} has no rows left to write ({len(rows)} read, {len(skipped)} bad, {too_long} too long)",
                where=str(source),
            )

    import pyarrow

    from rlrecipes import __version__

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    manifest = {
        "dataset": "gsm8k",
        "source": str(source),
        "template": template,
        "instruction": INSTRUCTIONS[template],
        "data_source": DATA_SOURCE,
        "tokenizer": None if tokenizer is None else str(getattr(tok, "name_or_path", tokenizer)),
        "max_prompt_length": max_prompt_length,
        "splits": splits_info,
        "writer": {"rlrecipes": __version__, "pyarrow": pyarrow.__version__},
    }
    with contextlib.ExitStack() as stack:
        # Every file is written to a temporary first; the renames happen on exit (in reverse order, so
        # the manifest lands last) and only when every write succeeded.
        manifest_tmp = stack.enter_context(atomic_path(out / "manifest.json"))
        for split, rows in converted.items():
            tmp = stack.enter_context(atomic_path(out / f"{split}.parquet"))
            _write_parquet(rows, tmp)
            splits_info[split]["sha256"] = sha256_file(tmp)
        manifest_tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        # The renames start when this block ends. Take the old manifest away first: a process killed between
        # two renames then leaves no manifest (the data stage runs again), never one describing files that
        # are no longer the ones it hashed.
        (out / "manifest.json").unlink(missing_ok=True)
    return manifest


def _split_of(path: Path) -> str | None:
    # datasets' own convention: a data file belongs to the split its name starts with.
    name = path.name.lower()
    for split in ("train", "test", "validation"):
        if name.startswith(split):
            return split
    return None


def _data_files(paths: list[Path]) -> tuple[str, dict[str, list[str]]]:
    builders = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}
    kinds = {builders.get(p.suffix.lower()) for p in paths}
    if None in kinds or len(kinds) != 1:
        raise RecipeError(
            "data files must all be .jsonl/.json or all .parquet",
            where=", ".join(str(p) for p in paths),
        )
    files: dict[str, list[str]] = {}
    for p in paths:
        split = _split_of(p)
        if split is None:
            raise RecipeError(
                "cannot tell the split of a data file from its name",
                where=str(p),
                hint="name files train*.jsonl / test*.jsonl (or .parquet)",
            )
        files.setdefault(split, []).append(str(p))
    return kinds.pop(), files


def load_source(sources: list[str] | str, config: str = "main") -> dict[str, list[dict]]:
    """Load GSM8K rows ({"question", "answer"}) per split with `datasets`.

    sources: a hub id ("openai/gsm8k", config `config`), a local dataset directory (a hub snapshot
    with a `main/` config folder, a `save_to_disk` directory, or a folder of train/test .jsonl or
    .parquet files), or one or more train*/test* .jsonl/.parquet files.
    """
    import datasets

    if isinstance(sources, (str, os.PathLike)):
        sources = [str(sources)]
    paths = [Path(s).expanduser() for s in sources]
    where = ", ".join(sources)
    try:
        if len(paths) == 1 and paths[0].is_dir():
            directory = paths[0]
            if (directory / "dataset_dict.json").exists():
                loaded = datasets.load_from_disk(str(directory))
            else:
                name = config if (directory / config).is_dir() else None
                loaded = datasets.load_dataset(str(directory), name)
        elif all(p.is_file() for p in paths):
            builder, files = _data_files(paths)
            loaded = datasets.load_dataset(builder, data_files=files)
        elif len(paths) == 1 and not paths[0].exists() and re.fullmatch(r"[\w.-]+/[\w.-]+", sources[0]):
            loaded = datasets.load_dataset(sources[0], config)
        else:
            missing = [str(p) for p in paths if not p.exists()]
            raise RecipeError(
                "source not found" if missing else "give one directory or hub id, or data files only",
                where=", ".join(missing) or where,
                hint="--source openai/gsm8k | DIR | train.jsonl test.jsonl",
            )
    except RecipeError:
        raise
    except Exception as exc:  # datasets raises many types (DatasetNotFoundError, ConnectionError, ...)
        raise RecipeError(
            f"cannot load GSM8K: {type(exc).__name__}: {exc}",
            where=where,
            hint="offline? pass a local directory or files (HF_HUB_OFFLINE=1 uses only the local cache)",
        ) from exc
    if not isinstance(loaded, (datasets.DatasetDict, dict)):
        raise RecipeError("expected a dataset with splits (train, test)", where=where)
    rows: dict[str, list[dict]] = {}
    for split in SPLITS:
        if split not in loaded:
            raise RecipeError(
                f"no {split!r} split (found: {', '.join(loaded) or 'none'})",
                where=where,
                hint="GSM8K needs a train and a test split",
            )
        ds = loaded[split]
        missing = [c for c in ("question", "answer") if c not in ds.column_names]
        if missing:
            raise RecipeError(
                f"split {split!r} has no column(s) {', '.join(missing)} (columns: {', '.join(ds.column_names)})",
                where=where,
            )
        rows[split] = ds.select_columns(["question", "answer"]).to_list()
    return rows

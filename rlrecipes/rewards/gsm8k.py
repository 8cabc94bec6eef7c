"""The GSM8K reward: one scorer for training (verl's `custom_reward_function`) and evaluation.

verl loads this file by path (`custom_reward_function.path=.../rlrecipes/rewards/gsm8k.py`,
`name=compute_score`) with importlib, outside any package, so it imports only the standard library
and defines no dataclasses (verl 0.8 does not register the module in sys.modules).

Modes (`mode=`, from `custom_reward_function.reward_kwargs.mode` in a recipe):
  strict    the last `#### N` in the response (the format verl's GSM8K prompt asks for)
  flexible  the last number anywhere in the response
  think     `<think>reasoning</think>` first, then `#### N` after `</think>`; format and answer must hold

Numbers are compared after normalisation: thousands commas, `$`, a leading `+`, a trailing period,
leading zeros and trailing fractional zeros (`72.0` == `72`) do not matter; `-0` is `0`; decimal digits
of other scripts (`٧٢`, `７２`) and U+2212 MINUS SIGN count as their ASCII forms. All of it is linear in
the response length and works on strings, never on int() (which refuses > 4300 digits).
"""

from __future__ import annotations

import functools
import re
import unicodedata

MODES = ("strict", "flexible", "think")

_NUMBER = r"[0-9][0-9,]*(?:\.[0-9]+)?"
# After "####": optional blanks, an optional sign and/or "$" in either order, then the number.
_AFTER_MARK = re.compile(r"[ \t]*(?:([+-])[ \t]*\$?|\$[ \t]*([+-])?)?[ \t]*(" + _NUMBER + ")")
_STRICT = re.compile(r"####" + _AFTER_MARK.pattern)
# The last number, found by searching the reversed response: linear however long the text, and the
# search stops at the first match from the end instead of collecting every number.
_NUMBER_REVERSED = re.compile(r"(?:[0-9]+\.)?[0-9,]*[0-9]")
_FULL_NUMBER = re.compile(r"\s*(?:([+-])\s*\$?|\$\s*([+-])?)?\s*(" + _NUMBER + r")\.?\s*")

_PRED_CHARS = 64
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


class _AsciiFold(dict):
    """str.translate table: decimal digits of any script -> ASCII, U+2212 / fullwidth signs -> ASCII.

    Filled lazily (__missing__), so import stays instant and translate() runs at C speed once a
    character has been seen.
    """

    _SIGNS = {"\u2212": "-", "\uff0d": "-", "\uff0b": "+", "\uff04": "$", "\uff0e": "."}

    def __missing__(self, code: int):
        char = chr(code)
        if char in self._SIGNS:
            value: object = self._SIGNS[char]
        elif char.isdecimal():
            value = str(unicodedata.decimal(char))
        else:
            value = code
        self[code] = value
        return value


_FOLD = _AsciiFold()


def _canonical(negative: bool, digits: str) -> str:
    """'1,000.50' -> '1000.5'; '007' -> '7'; '72.0' -> '72'; '-0.0' -> '0'."""
    digits = digits.replace(",", "")
    if "." in digits:
        integer, fraction = digits.split(".", 1)
        fraction = fraction.rstrip("0")
    else:
        integer, fraction = digits, ""
    value = (integer.lstrip("0") or "0") + ("." + fraction if fraction else "")
    if negative and value != "0":
        value = "-" + value
    return value


def _from_match(match: re.Match) -> str:
    return _canonical("-" in (match.group(1) or "", match.group(2) or ""), match.group(3))


@functools.lru_cache(maxsize=1 << 16)
def normalize_number(text: str) -> str | None:
    """Canonical string of a number written as a whole string ('$1,000.00' -> '1000'); None if none."""
    if not isinstance(text, str):
        text = str(text)
    if not text.isascii():
        text = text.translate(_FOLD)
    match = _FULL_NUMBER.fullmatch(text)
    return _from_match(match) if match else None


def _extract_strict(text: str) -> str | None:
    # Fast path: the last "####" is almost always the answer; rfind runs at memchr speed.
    mark = text.rfind("####")
    if mark == -1:
        return None
    match = _AFTER_MARK.match(text, mark + 4)
    if match:
        return _from_match(match)
    # The last marker has no number after it ("#### The answer"): scan once, linearly, for the last one.
    last = None
    for last in _STRICT.finditer(text, 0, mark):  # noqa: B007 -- only the last match is wanted
        pass
    return _from_match(last) if last else None


def _extract_flexible(text: str) -> str | None:
    reverse = text[::-1]
    match = _NUMBER_REVERSED.search(reverse)
    if match is None:
        return None
    digits = match.group()[::-1]
    pos = match.end()
    if reverse.startswith("$", pos):
        pos += 1
    negative = False
    if reverse.startswith("-", pos):
        # A '-' glued to a word or a number is a hyphen or a subtraction ("COVID-19", "20-5"), not a sign.
        before = reverse[pos + 1 : pos + 2]
        negative = not before.isalnum()
    return _canonical(negative, digits)


def split_think(text: str) -> str | None:
    """The text after `</think>` when `text` is `<think>non-empty reasoning</think>...`; else None."""
    body = text.lstrip()
    if not body.startswith(THINK_OPEN):
        return None
    close = body.find(THINK_CLOSE)
    if close == -1 or body.count(THINK_OPEN) != 1 or body.count(THINK_CLOSE) != 1:
        return None
    if not body[len(THINK_OPEN) : close].strip():
        return None
    return body[close + len(THINK_CLOSE) :]


def extract_answer(solution_str: str, mode: str = "strict") -> tuple[str | None, bool]:
    """(canonical answer or None, format ok) for one response under `mode`.

    In think mode with a broken format the answer is still extracted (strictly, from the whole
    response) so logs can tell "right answer, wrong format" apart; the score stays 0.
    """
    text = solution_str if solution_str.isascii() else solution_str.translate(_FOLD)
    if mode == "strict":
        answer = _extract_strict(text)
        return answer, answer is not None
    if mode == "flexible":
        answer = _extract_flexible(text)
        return answer, answer is not None
    if mode == "think":
        tail = split_think(text)
        if tail is None:
            return _extract_strict(text), False
        answer = _extract_strict(tail)
        return answer, answer is not None
    raise ValueError(f"unknown GSM8K scoring mode {mode!r}; choose from: {', '.join(MODES)}")


def compute_score(
    data_source,
    solution_str,
    ground_truth,
    extra_info=None,
    *,
    mode: str = "strict",
    return_dict: bool = False,
    format_score: float = 0.0,
    reward_router_address=None,
    reward_model_tokenizer=None,
):
    """verl's custom reward signature. 1.0 for a correct answer in the mode's format, else
    `format_score` when the format holds, else 0.0.

    With `return_dict=True` (reward_kwargs) returns {"score", "acc", "format", "pred"}: the same keys
    and types for every response, as verl's reward managers require to stack them into arrays; `pred`
    is the canonical answer ("" when none) and feeds verl's maj@N validation metric.
    `reward_router_address` / `reward_model_tokenizer` are passed by verl 0.8's reward loop when a
    reward model is configured; this rule-based scorer ignores them. Unknown keyword arguments (a
    misspelled reward_kwargs key) raise TypeError.
    """
    if mode not in MODES:
        raise ValueError(f"unknown GSM8K scoring mode {mode!r}; choose from: {', '.join(MODES)}")
    truth = normalize_number(ground_truth)
    if truth is None:
        raise ValueError(f"GSM8K ground truth {ground_truth!r} is not a number (data_source={data_source!r})")
    answer, format_ok = extract_answer(solution_str if isinstance(solution_str, str) else str(solution_str), mode)
    acc = answer is not None and answer == truth
    if format_ok:
        score = 1.0 if acc else float(format_score)
    else:
        score = 0.0
    if return_dict:
        # pred is capped: a 100 KB "number" is garbage and would bloat verl's logged arrays.
        pred = (answer or "")[:_PRED_CHARS]
        return {"score": score, "acc": 1.0 if acc else 0.0, "format": 1.0 if format_ok else 0.0, "pred": pred}
    return score

"""Agreement, measured: our scorer vs verl's `gsm8k.compute_score` and lm-eval's gsm8k filters.

A generated corpus (>= 300 responses, 28 kinds) is scored four ways per mode: ours, verl's (run in
the pinned verl venv), lm-eval's strict-match / flexible-extract (regexes and exact_match options read
from the installed lm_eval/tasks/gsm8k/gsm8k.yaml, applied with lm-eval's own filter and metric code).
Every kind must either agree completely with a reference or be listed in DELIBERATE with the reason;
each listed difference must actually occur, and in each of them we credit the right answer where the
reference does not. The table printed at the end (pytest -s) is the one in docs/data-and-rewards.md.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from rlrecipes.rewards.gsm8k import compute_score

pytestmark = pytest.mark.verl

# (kind, reference) -> why we differ. reference: "verl-strict", "verl-flexible", "lm-strict", "lm-flexible".
DELIBERATE = {
    ("dollar", "verl-strict"): "`#### $72`: the `$` is normalised; verl's regex needs a digit after `#### `",
    ("dollar", "lm-strict"): "`#### $72`: same, lm-eval's strict regex needs a digit after `#### `",
    ("dollar_cents", "verl-strict"): "`#### $1,500.00`: `$` and `.00` are normalised",
    ("dollar_cents", "lm-strict"): "`#### $1,500.00`: `$` and `.00` are normalised",
    ("trailing_period", "verl-strict"): "`#### 72.`: verl compares `72.` to `72`",
    ("decimal_zero", "verl-strict"): "`#### 72.0` equals `72` (lm-eval and verl compare strings)",
    ("decimal_zero", "lm-strict"): "`#### 72.0` equals `72` (lm-eval and verl compare strings)",
    ("plus", "verl-strict"): "`#### +72`: a leading `+` is accepted",
    ("plus", "lm-strict"): "`#### +72`: a leading `+` is accepted",
    ("no_space", "verl-strict"): "`####72`: blanks after `####` are optional",
    ("no_space", "lm-strict"): "`####72`: blanks after `####` are optional",
    ("extra_spaces", "verl-strict"): "`####   72`: blanks after `####` are optional",
    ("extra_spaces", "lm-strict"): "`####   72`: blanks after `####` are optional",
    ("leading_zero", "verl-strict"): "`#### 007` equals `7`",
    ("leading_zero", "lm-strict"): "`#### 007` equals `7`",
    ("unicode_digits", "verl-strict"): "`#### ٧٢` (other scripts' decimal digits) reads as 72",
    ("unicode_digits", "lm-strict"): "`#### ٧٢` (other scripts' decimal digits) reads as 72",
    ("unicode_digits", "verl-flexible"): "`٧٢` reads as 72",
    ("unicode_digits", "lm-flexible"): "`٧٢` reads as 72",
    ("corrected_answer", "lm-strict"): "two `#### N`: the last one counts (as verl); lm-eval takes the first",
    ("long_tail", "verl-strict"): "the answer is found anywhere; verl looks only at the last 300 characters",
    ("long_tail_flexible", "verl-flexible"): "the last number is found anywhere; verl looks only at the last 300 characters",
    ("long_tail", "verl-flexible"): "the last number is found anywhere; verl looks only at the last 300 characters",
    ("trailing_comma", "verl-flexible"): "`#### 72, as computed`: verl's flexible mode compares `72,`",
    ("comma", "verl-flexible"): "`1,500` equals `1500`; verl's flexible mode keeps the comma",
    ("comma_flexible", "verl-flexible"): "`1,500` equals `1500`; verl's flexible mode keeps the comma",
    ("period_flexible", "verl-flexible"): "`... is 72.`: verl's flexible mode compares `72.`",
    ("trailing_period", "verl-flexible"): "`#### 72.`: verl's flexible mode compares `72.`",
    ("decimal_zero", "lm-flexible"): "`72.0` equals `72`",
    ("decimal_zero", "verl-flexible"): "`72.0` equals `72`",
    ("dollar_cents", "verl-flexible"): "`$1,500.00` equals `1500`",
    ("dollar_cents", "lm-flexible"): "`$1,500.00` equals `1500`",
    ("leading_zero", "verl-flexible"): "`007` equals `7`",
    ("leading_zero", "lm-flexible"): "`007` equals `7`",
    ("hyphen_range", "verl-flexible"): "`pages 10-72`: a `-` right after a digit is a range/subtraction, not a sign",
    ("hyphen_range", "lm-flexible"): "`pages 10-72`: a `-` right after a digit is a range/subtraction, not a sign",
}

REASONING = [
    "Natalia sold 48/2 = <<48/2=24>>24 clips in May.",
    "First find the total cost: 3 * 4 = 12 dollars. Then add the tax of 2 dollars.",
    "She works 5 days a week for 4 weeks, so 20 days.",
    "Let x be the number of apples. Then 2x + 6 = 18.",
]


def _raw(value: int) -> str:
    return f"{value:,}"  # GSM8K writes thousands with commas in its '#### ' line


def _corpus() -> list[dict]:
    rng = random.Random(20240607)
    items: list[dict] = []

    def add(kind: str, response: str, gt: str, raw: str | None = None):
        items.append(
            {"kind": kind, "response": response, "gt": gt, "target": f"{rng.choice(REASONING)}\n#### {raw or gt}"}
        )

    for _ in range(12):
        r = rng.choice(REASONING)
        n = rng.randint(1, 999)
        big = rng.randint(1000, 99_999)
        wrong = n + rng.randint(1, 50)
        add("clean", f"{r}\n#### {n}", str(n))
        add("clean_wrong", f"{r}\n#### {wrong}", str(n))
        add("negative", f"{r}\nSo the change is -{n}.\n#### -{n}", f"-{n}")
        add("comma", f"{r}\n#### {_raw(big)}", str(big), _raw(big))
        add("dollar", f"{r}\n#### ${n}", str(n))
        add("dollar_cents", f"{r}\n#### ${_raw(big)}.00", str(big), _raw(big))
        add("trailing_period", f"{r}\n#### {n}.", str(n))
        add("decimal_zero", f"{r}\n#### {n}.0", str(n))
        add("plus", f"{r}\n#### +{n}", str(n))
        add("no_space", f"{r}\n####{n}", str(n))
        add("extra_spaces", f"{r}\n####   {n}", str(n))
        add("leading_zero", f"{r}\n#### 00{n}", str(n))
        add("decimal", f"{r}\n#### {n}.5", f"{n}.5")
        add("unicode_digits", f"{r}\n#### " + "".join(chr(0x0660 + int(d)) for d in str(n)), str(n))
        add("corrected_answer", f"{r}\n#### {wrong}\nWait, I made a mistake. {r}\n#### {n}", str(n))
        add("trailing_question", f"{r}\n#### {n}\n\nQuestion: Tom has {wrong} apples and eats 2.", str(n))
        add("long_tail", f"{r}\n#### {n}\n" + "I double-checked the reasoning above carefully. " * 8, str(n))
        add("long_tail_flexible", f"{r} The result is {n}.\n" + "I double-checked the work. " * 14, str(n))
        add("no_answer", f"{r}\nI am not sure how to finish this.", str(n))
        add("flexible_only", f"{r}\nThe answer is {n}", str(n))
        add("period_flexible", f"{r}\nThe answer is {n}.", str(n))
        add("comma_flexible", f"{r}\nThe answer is {_raw(big)}", str(big), _raw(big))
        add("think_block", f"<think>{r}</think>\n#### {n}", str(n))
        add("answer_then_words", f"{r}\n#### {n} dollars in total", str(n))
        add("trailing_comma", f"{r}\n#### {n}, as computed", str(n))
        add("hyphen_range", f"{r}\nSee pages 10-{n}", str(n))
        add("empty", "", str(n))
        add("words_only", "The answer is seventy-two.", str(n))
    return items


def _lm_eval_gsm8k_yaml() -> dict:
    import lm_eval
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    # lm-eval task YAMLs use `!function module.attr`; keep the text, we only read regexes.
    Loader.add_multi_constructor("!function", lambda loader, suffix, node: loader.construct_scalar(node))
    path = Path(lm_eval.__file__).parent / "tasks" / "gsm8k" / "gsm8k.yaml"
    return yaml.load(path.read_text(), Loader=Loader)  # noqa: S506 -- a SafeLoader subclass


def _lm_eval_scores(corpus: list[dict]) -> dict[str, list[float]]:
    from lm_eval.api.metrics import exact_match_hf_evaluate
    import lm_eval.filters  # noqa: F401 -- registers the filters ("regex", "take_first")
    from lm_eval.api.registry import get_filter

    task = _lm_eval_gsm8k_yaml()
    assert task["doc_to_target"] == "{{answer}}"  # the reference is the raw GSM8K answer
    metric = next(m for m in task["metric_list"] if m["metric"] == "exact_match")
    options = {k: metric[k] for k in ("regexes_to_ignore", "ignore_case", "ignore_punctuation") if k in metric}
    scores = {}
    for pipeline in task["filter_list"]:
        resps: list = [[item["response"]] for item in corpus]
        docs = [{} for _ in corpus]
        for step in pipeline["filter"]:
            kwargs = {k: v for k, v in step.items() if k != "function"}
            resps = list(get_filter(step["function"])(**kwargs).apply(resps, docs))
        name = {"strict-match": "lm-strict", "flexible-extract": "lm-flexible"}[pipeline["name"]]
        scores[name] = [
            float(exact_match_hf_evaluate(predictions=[pred], references=[item["target"]], **options)["exact_match"])
            for pred, item in zip(resps, corpus)
        ]
    return scores


VERL_CODE = r"""
import json, sys
from verl.utils.reward_score import gsm8k
corpus = json.load(open(sys.argv[1]))
out = {
    "verl-strict": [float(gsm8k.compute_score(c["response"], c["gt"], method="strict")) for c in corpus],
    "verl-flexible": [float(gsm8k.compute_score(c["response"], c["gt"], method="flexible")) for c in corpus],
}
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def scored(tmp_path_factory, verl_python):
    import subprocess

    corpus = _corpus()
    path = tmp_path_factory.mktemp("agreement") / "corpus.json"
    path.write_text(json.dumps(corpus))
    proc = subprocess.run(
        [str(verl_python("0.5.0")), "-c", VERL_CODE, str(path)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    refs = json.loads(proc.stdout.split("RESULT", 1)[1])
    refs.update(_lm_eval_scores(corpus))
    ours = {
        mode: [compute_score("openai/gsm8k", c["response"], c["gt"], mode=mode) for c in corpus]
        for mode in ("strict", "flexible")
    }
    return corpus, ours, refs


def _mode(reference: str) -> str:
    return reference.split("-", 1)[1]


def test_corpus_is_large_and_varied():
    corpus = _corpus()
    assert len(corpus) >= 300
    assert len({c["response"] for c in corpus}) >= 300
    assert len({c["kind"] for c in corpus}) == 28


def test_agreement_with_verl_and_lm_eval(scored):
    corpus, ours, refs = scored
    kinds = sorted({c["kind"] for c in corpus})
    differing: set[tuple[str, str]] = set()
    lines = [f"{'kind':<20} " + " ".join(f"{r:>14}" for r in refs)]
    for kind in kinds:
        idx = [i for i, c in enumerate(corpus) if c["kind"] == kind]
        cells = []
        for ref, values in refs.items():
            ours_values = ours[_mode(ref)]
            disagree = [i for i in idx if ours_values[i] != values[i]]
            cells.append(f"{len(idx) - len(disagree):>3}/{len(idx):<3}" + (" DIFF" if disagree else "     "))
            if disagree:
                differing.add((kind, ref))
                # Where we differ, we credit the right answer and the reference does not.
                for i in disagree:
                    assert (ours_values[i], values[i]) == (1.0, 0.0), (kind, ref, corpus[i])
        lines.append(f"{kind:<20} " + " ".join(f"{c:>14}" for c in cells))
    total = sum(len(corpus) for _ in refs)
    agree = sum(ours[_mode(ref)][i] == values[i] for ref, values in refs.items() for i in range(len(corpus)))
    print("\n".join(lines))
    print(f"agreement: {agree}/{total} scorings ({len(corpus)} responses x {len(refs)} references)")
    for key in sorted(differing):
        print(f"  deliberate: {key[0]} vs {key[1]}: {DELIBERATE.get(key, 'NOT LISTED')}")

    unlisted = differing - set(DELIBERATE)
    assert not unlisted, f"undocumented differences: {sorted(unlisted)}"
    stale = set(DELIBERATE) - differing
    assert not stale, f"listed differences that no longer occur: {sorted(stale)}"


def test_references_are_not_trivial(scored):
    # Guards the harness itself: each reference credits clean answers and rejects wrong ones.
    corpus, _ours, refs = scored
    clean = [i for i, c in enumerate(corpus) if c["kind"] == "clean"]
    wrong = [i for i, c in enumerate(corpus) if c["kind"] == "clean_wrong"]
    for ref, values in refs.items():
        assert all(values[i] == 1.0 for i in clean), ref
        assert all(values[i] == 0.0 for i in wrong), ref

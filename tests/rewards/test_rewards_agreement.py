"""Agreement, measured: our scorer vs verl's `gsm8k.compute_score` and lm-eval's gsm8k filters.

A generated corpus (>= 300 responses, 32 kinds) is scored six ways: ours (strict, flexible), verl's
(strict, flexible; run in the pinned verl venv), lm-eval's strict-match / flexible-extract (regexes and
exact_match options read from the installed lm_eval/tasks/gsm8k/gsm8k.yaml, applied with lm-eval's own
filter and metric code). SCORES is the literal table of what each of the six gives every response of
a kind, written down once and reviewed:
  - our two columns are our specification: a change that credits a wrong format (`#### The answer is
    72`) or misses a right answer fails `test_our_scores_are_the_table` without any reference installed;
  - the reference columns are checked against the real verl and lm-eval (`test_references_are_the_table`);
  - DELIBERATE lists, with the reason, exactly the cells where we differ from a reference, and in every
    one of them we credit a right answer that the reference misses -- never the other way round.
The table printed by test_agreement_with_verl_and_lm_eval (pytest -s) is the one in
docs/data-and-rewards.md.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from rlrecipes.rewards.gsm8k import compute_score

# one xdist worker runs this module: its module fixtures are built once (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("rewards/test_rewards_agreement")


REFERENCES = ("verl-strict", "verl-flexible", "lm-strict", "lm-flexible")
# kind -> the score every response of that kind gets from
#        (ours strict, ours flexible, verl-strict, verl-flexible, lm-strict, lm-flexible)
SCORES = {
    "answer_then_words": (1, 1, 1, 1, 1, 1),
    "bold_after_mark": (0, 1, 0, 1, 0, 1),
    "clean": (1, 1, 1, 1, 1, 1),
    "clean_wrong": (0, 0, 0, 0, 0, 0),
    "comma": (1, 1, 1, 0, 1, 1),
    "comma_flexible": (0, 1, 0, 0, 0, 1),
    "corrected_answer": (1, 1, 1, 1, 0, 1),
    "decimal": (1, 1, 1, 1, 1, 1),
    "decimal_zero": (1, 1, 0, 0, 0, 0),
    "dollar": (1, 1, 0, 1, 0, 1),
    "dollar_cents": (1, 1, 0, 0, 0, 0),
    "empty": (0, 0, 0, 0, 0, 0),
    "extra_spaces": (1, 1, 0, 1, 0, 1),
    "flexible_only": (0, 1, 0, 1, 0, 1),
    "hyphen_range": (0, 1, 0, 0, 0, 0),
    "leading_zero": (1, 1, 0, 0, 0, 0),
    "long_tail": (1, 1, 0, 0, 1, 1),
    "long_tail_flexible": (0, 1, 0, 0, 0, 1),
    "marked_wrong_then_unmarked": (0, 1, 0, 1, 0, 1),
    "negative": (1, 1, 1, 1, 1, 1),
    "newline_after_mark": (0, 1, 0, 1, 0, 1),
    "no_answer": (0, 0, 0, 0, 0, 0),
    "no_space": (1, 1, 0, 1, 0, 1),
    "period_flexible": (0, 1, 0, 0, 0, 1),
    "plus": (1, 1, 0, 1, 0, 1),
    "think_block": (1, 1, 1, 1, 1, 1),
    "trailing_comma": (1, 1, 1, 0, 1, 1),
    "trailing_period": (1, 1, 0, 0, 1, 1),
    "trailing_question": (1, 0, 1, 0, 1, 0),
    "unicode_digits": (1, 1, 0, 0, 0, 0),
    "words_after_mark": (0, 1, 0, 1, 0, 1),
    "words_only": (0, 0, 0, 0, 0, 0),
}
COLUMNS = ("ours-strict", "ours-flexible", *REFERENCES)


def expected(kind: str, column: str) -> float:
    return float(SCORES[kind][COLUMNS.index(column)])


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
        # Wrong formats a lax strict scorer would credit: text or markup between `####` and the number.
        add("words_after_mark", f"{r}\n#### The answer is {n}", str(n))
        add("bold_after_mark", f"{r}\n#### **{n}**", str(n))
        add("newline_after_mark", f"{r}\n####\n{n}", str(n))
        # A marked wrong answer, then the right one unmarked: strict must not credit it.
        add("marked_wrong_then_unmarked", f"{r}\n#### {wrong}\nActually it is {n}", str(n))
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
    assert {c["kind"] for c in corpus} == set(SCORES)


def test_our_scores_are_the_table():
    """Our scorer against our own specification, response by response (no reference needed)."""
    for item in _corpus():
        for mode in ("strict", "flexible"):
            got = compute_score("openai/gsm8k", item["response"], item["gt"], mode=mode)
            assert got == expected(item["kind"], f"ours-{mode}"), (item["kind"], mode, item["response"])


def test_deliberate_differences_are_exactly_where_the_table_differs():
    differing = {(kind, ref) for kind in SCORES for ref in REFERENCES
                 if expected(kind, f"ours-{_mode(ref)}") != expected(kind, ref)}
    assert differing == set(DELIBERATE), (sorted(differing - set(DELIBERATE)), sorted(set(DELIBERATE) - differing))
    for kind, ref in DELIBERATE:
        # we only ever differ by crediting a right answer that the reference misses
        assert (expected(kind, f"ours-{_mode(ref)}"), expected(kind, ref)) == (1.0, 0.0), (kind, ref)


@pytest.mark.verl
def test_references_are_the_table(scored):
    corpus, _ours, refs = scored
    for ref, values in refs.items():
        for item, value in zip(corpus, values):
            assert value == expected(item["kind"], ref), (ref, item["kind"], item["response"])


@pytest.mark.verl
def test_agreement_with_verl_and_lm_eval(scored):
    corpus, ours, refs = scored
    kinds = sorted({c["kind"] for c in corpus})
    lines = [f"{'kind':<26} " + " ".join(f"{r:>14}" for r in refs)]
    for kind in kinds:
        idx = [i for i, c in enumerate(corpus) if c["kind"] == kind]
        cells = []
        for ref, values in refs.items():
            disagree = [i for i in idx if ours[_mode(ref)][i] != values[i]]
            cells.append(f"{len(idx) - len(disagree):>3}/{len(idx):<3}" + (" DIFF" if disagree else "     "))
            assert bool(disagree) == ((kind, ref) in DELIBERATE), (kind, ref)
        lines.append(f"{kind:<26} " + " ".join(f"{c:>14}" for c in cells))
    total = sum(len(corpus) for _ in refs)
    agree = sum(ours[_mode(ref)][i] == values[i] for ref, values in refs.items() for i in range(len(corpus)))
    print("\n".join(lines))
    print(f"agreement: {agree}/{total} scorings ({len(corpus)} responses x {len(refs)} references)")
    for key in sorted(DELIBERATE):
        print(f"  deliberate: {key[0]} vs {key[1]}: {DELIBERATE[key]}")


@pytest.mark.verl
def test_references_are_not_trivial(scored):
    # Guards the harness itself: each reference credits clean answers and rejects wrong ones.
    corpus, _ours, refs = scored
    clean = [i for i, c in enumerate(corpus) if c["kind"] == "clean"]
    wrong = [i for i, c in enumerate(corpus) if c["kind"] == "clean_wrong"]
    for ref, values in refs.items():
        assert all(values[i] == 1.0 for i in clean), ref
        assert all(values[i] == 0.0 for i in wrong), ref


@pytest.mark.verl
def test_strict_literal_cases_match_the_references(verl_python, tmp_path):
    """test_rewards' literal strict cases with text between `####` and the number score 0 in
    verl's and lm-eval's strict scorers too (so our 0 there is agreement, not a choice)."""
    import subprocess

    from test_rewards import TEXT_AFTER_MARK

    cases = [{"kind": "literal", "response": r, "gt": str(t), "target": f"x\n#### {t}"}
             for r, t in TEXT_AFTER_MARK]
    assert len(cases) >= 9
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases))
    proc = subprocess.run([str(verl_python("0.5.0")), "-c", VERL_CODE, str(path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    verl = json.loads(proc.stdout.split("RESULT", 1)[1])["verl-strict"]
    lm = _lm_eval_scores(cases)["lm-strict"]
    for case, v, m in zip(cases, verl, lm):
        assert (v, m) == (0.0, 0.0), case["response"]
        assert compute_score("openai/gsm8k", case["response"], case["gt"], mode="strict") == 0.0

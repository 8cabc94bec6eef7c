"""docs/bench/gpu-hopper-3b.md section G quotes the packed-call seconds of benchmarks/gpu/rmpad_attention.py --jitter
on the CPU: every figure of its table comes from the two runs of each attention recorded beside it."""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RECORDS = REPO / "docs" / "bench" / "cpu-data" / "rmpad-flex"
DOC = REPO / "docs" / "bench" / "gpu-hopper-3b.md"


def runs(attn: str) -> list[dict]:
    return [json.loads((RECORDS / f"{attn}-jitter20-run{i}.json").read_text()) for i in (1, 2)]


def row(label: str) -> list[str]:
    line = next(x.strip() for x in DOC.read_text().splitlines() if x.strip().startswith(f"| {label}"))
    return [cell.strip() for cell in line.strip("|").split("|")][1:]


def test_the_flex_and_sdpa_rows_are_their_records():
    for attn, label in (("flex_attention", "flex_attention, s"), ("sdpa", "sdpa (no compiling), s")):
        recorded = runs("flex" if attn == "flex_attention" else "sdpa")
        for run in recorded:
            assert run["attn"] == attn and run["jitter"] == 20 and run["device"] == "cpu"
            assert len(run["packed_calls_s"]) == 6 and max(run["max_abs_logprob_diff_packed_vs_alone"]) == 0.0
        first, second, later = row(label)
        assert first == " / ".join(f"{r['packed_calls_s'][0]:.2f}" for r in recorded)
        assert second == " / ".join(f"{r['packed_calls_s'][1]:.2f}" for r in recorded)
        rest = [c for r in recorded for c in r["packed_calls_s"][2:]]
        assert later == f"{min(rest):.2f}-{max(rest):.2f}"


def test_the_rows_lengths_and_the_compiles_are_as_the_text_says():
    flex, sdpa = runs("flex"), runs("sdpa")
    lengths = {tuple(r["packed_row_lengths"]) for r in flex + sdpa}
    assert len(lengths) == 1
    header = next(x for x in DOC.read_text().splitlines() if x.strip().startswith("| packed call (row of"))
    assert re.search(r"row of ([\d, ]+) tokens", header).group(1) == ", ".join(map(str, lengths.pop()))
    # two compiles, then flat: the first two flex calls each slower than any later one; SDPA's calls all alike
    for r in flex:
        calls = r["packed_calls_s"]
        assert min(calls[:2]) > 4 * max(calls[2:])
    for r in sdpa:
        calls = r["packed_calls_s"]
        assert max(calls) < 1.5 * min(calls)


def test_the_benchmarks_summary_quotes_the_same_records():
    line = next(x for x in (REPO / "docs" / "benchmarks.md").read_text().splitlines()
                if x.startswith("| packed micro batches of a new length every call"))
    flex, sdpa = runs("flex"), runs("sdpa")
    first = " / ".join(f"{r['packed_calls_s'][0]:.2f}" for r in flex)
    second = " / ".join(f"{r['packed_calls_s'][1]:.2f}" for r in flex)
    rest = [c for r in flex for c in r["packed_calls_s"][2:]]
    every = [c for r in sdpa for c in r["packed_calls_s"]]
    for quoted in (f"{first} s at the first call", f"{second} s at the first new length",
                   f"then {min(rest):.2f}-{max(rest):.2f} s at every new length",
                   f"SDPA {min(every):.2f}-{max(every):.2f} s throughout"):
        assert quoted in line, quoted

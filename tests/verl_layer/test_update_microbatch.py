"""benchmarks/gpu/update_microbatch.py on the CPU with verl 0.9.1's own source files, tiny architecture: the two
flagship levers it measures before a verl launch spends minutes on them -- log-probs through verl's fused kernels
(FusedLinearForPPO, torch backend, loaded from verl's file) and the update without gradient checkpointing. The fused
log-probs equal the plain path's; each mode says what it ran; a missing source file is refused by name."""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu" / "update_microbatch.py"


def verl_file(python: Path, relative: str) -> Path:
    return verl_dir(python) / relative


@functools.cache
def verl_dir(python: Path) -> Path:
    """Where that interpreter's verl package lives (found once, not imported)."""
    out = subprocess.run([str(python), "-c", "import importlib.util as u; "
                          "print(u.find_spec('verl').submodule_search_locations[0])"],
                         capture_output=True, text=True, check=True, timeout=120).stdout.strip()
    return Path(out)


def run(python: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), str(SCRIPT), "--arch", "tiny", "--micro", "4", "--prompt", "8",
                           "--response", "40", "--pad-to", "64", "--reps", "1",
                           "--verl-source", str(verl_file(python, "utils/torch_functional.py")), *extra],
                          capture_output=True, text=True, timeout=300, cwd=REPO)


@pytest.mark.parametrize("checkpointing", [True, False])
def test_the_fused_path_gives_the_plain_log_probs_with_and_without_checkpointing(verl_python, checkpointing):
    python = verl_python("0.9.1")
    fused = verl_file(python, "utils/experimental/torch_functional.py")
    done = run(python, "--fused-source", str(fused), *([] if checkpointing else ["--no-checkpointing"]))
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout[done.stdout.index("{"):])
    assert result["log_probs"] == "fused (FusedLinearForPPO, torch)"
    assert result["gradient_checkpointing"] is checkpointing
    assert result["fused_vs_plain_max_abs_diff"] < 1e-4  # fp32 on the CPU
    assert result["fwd_bwd_seconds_per_micro_batch"] > 0


def test_the_plain_path_reports_no_fused_comparison(verl_python):
    done = run(verl_python("0.9.1"))
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout[done.stdout.index("{"):])
    assert (result["log_probs"], result["fused_vs_plain_max_abs_diff"], result["gradient_checkpointing"]) == \
        ("logprobs_from_logits_v2", None, True)


def test_a_missing_source_file_is_refused_by_name(verl_python, tmp_path):
    missing = tmp_path / "torch_functional.py"
    done = run(verl_python("0.9.1"), "--fused-source", str(missing))
    assert done.returncode == 2 and f"{missing}: no such file" in done.stderr, done.stderr


def test_no_repetitions_is_refused_by_name(verl_python):
    done = run(verl_python("0.9.1"), "--reps", "0")  # the later --reps wins over run()'s own
    assert done.returncode == 2 and "--reps 0: must be at least 1" in done.stderr, done.stderr

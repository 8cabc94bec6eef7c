"""benchmarks/gpu/verl_trial.py, which puts one edit of the Hopper table into verl 0.9.1 or takes it out for a launch.

rows-on-host on a copy of the released verl 0.9.1 package, imported as the product imports it: the real
`FSDPEngineWithLMHead.forward_step` is called with a GSM8K-shaped batch built by verl's own `tu.get_tensordict`,
and what reaches `prepare_model_inputs` is read. Released, every per-row non-tensor field rides along in the
copy to the device; patched, only the tensors, the batch-level values and `multi_modal_inputs` do, and the
batch the worker holds keeps them all. Apply, check and revert give back the released bytes; a changed anchor is
a mismatch that writes nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu" / "verl_trial.py"
IMPL = Path("workers") / "engine" / "fsdp" / "transformer_impl.py"

# one xdist worker runs this module: its module fixture (a copy of verl) is built once (tests/conftest.py)
pytestmark = [pytest.mark.verl, pytest.mark.xdist_group("verl_layer/test_verl_trial")]

# What the worker's forward_step hands to prepare_model_inputs, on CPU (the device id is the one thing changed).
PROBE = textwrap.dedent("""
    import json, torch
    import verl.workers.engine.fsdp.transformer_impl as impl
    from verl.utils import tensordict_utils as tu

    class Reached(Exception):
        pass

    class Engine:
        def prepare_model_inputs(self, micro_batch):
            raise Reached({k: type(v).__name__ for k, v in micro_batch.items()})

    impl.get_device_id = lambda: "cpu"
    rows = 4
    batch = tu.get_tensordict({
        "input_ids": torch.nested.as_nested_tensor([torch.arange(5 + i) for i in range(rows)], layout=torch.jagged),
        "responses": torch.zeros(rows, 3, dtype=torch.long),
        "raw_prompt": [[{"role": "user", "content": f"question {i}"}] for i in range(rows)],
        "reward_model": [{"ground_truth": str(i), "style": "rule"} for i in range(rows)],
        "data_source": [f"gsm8k-{i}" for i in range(rows)],
        "multi_modal_inputs": [{"n": i} for i in range(rows)],
    }, non_tensor_dict={"temperature": 1.0, "use_remove_padding": True})
    try:
        impl.FSDPEngineWithLMHead.forward_step(Engine(), batch, loss_function=None, forward_only=True)
    except Reached as reached:
        print(json.dumps({"copied": reached.args[0], "batch": sorted(batch.keys()),
                          "source": impl.__file__}))
""")


@pytest.fixture(scope="module")
def verl_copy(tmp_path_factory, verl_python) -> Path:
    """A copy of the released verl 0.9.1 package (no byte-code), importable ahead of the installed one."""
    python = verl_python("0.9.1")
    out = subprocess.run([str(python), "-c", "import importlib.util as u; "
                          "print(u.find_spec('verl').submodule_search_locations[0])"],
                         capture_output=True, text=True, timeout=120, check=True)
    top = tmp_path_factory.mktemp("site")
    shutil.copytree(out.stdout.strip(), top / "verl", ignore=shutil.ignore_patterns("__pycache__"))
    return top / "verl"


def trial(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "rows-on-host", *args], capture_output=True, text=True,
                          timeout=60)


def probe(verl_python, root: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(root.parent), CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([str(verl_python("0.9.1")), "-c", PROBE], capture_output=True, text=True, timeout=300,
                          env=env, cwd=root.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(seen["source"]).resolve() == (root / IMPL).resolve()  # the copy, not the installed verl
    return seen


def test_released_forward_step_copies_every_row_field_patched_only_what_the_engine_reads(verl_copy, verl_python):
    released = (verl_copy / IMPL).read_bytes()
    every = ["data_source", "input_ids", "multi_modal_inputs", "raw_prompt", "responses", "reward_model",
             "temperature", "use_remove_padding"]
    before = probe(verl_python, verl_copy)
    assert sorted(before["copied"]) == every and before["batch"] == every
    assert before["copied"]["raw_prompt"] == "NonTensorStack"  # a per-row field, rebuilt row by row by .to()
    assert before["copied"]["temperature"] == "NonTensorData"  # one value for the batch

    check = trial("--verl-root", str(verl_copy), "--check")
    assert check.returncode == 1 and check.stdout.startswith("UNPATCHED ")
    first = trial("--verl-root", str(verl_copy))
    assert first.returncode == 0 and first.stdout.startswith(f"PATCHED {verl_copy / IMPL} rows-on-host ")
    assert trial("--verl-root", str(verl_copy)).stdout.startswith("ALREADY ")
    assert trial("--verl-root", str(verl_copy), "--check").returncode == 0

    after = probe(verl_python, verl_copy)
    assert sorted(after["copied"]) == ["input_ids", "multi_modal_inputs", "responses", "temperature",
                                       "use_remove_padding"]
    assert after["batch"] == every  # the worker's batch keeps them for its post-processing

    reverted = trial("--verl-root", str(verl_copy), "--revert")
    assert reverted.returncode == 0 and reverted.stdout.startswith("REVERTED ")
    assert (verl_copy / IMPL).read_bytes() == released
    assert trial("--verl-root", str(verl_copy), "--revert").stdout.startswith("UNPATCHED ")


def test_a_changed_anchor_is_a_mismatch_and_nothing_is_written(verl_copy, tmp_path):
    root = tmp_path / "verl"
    for rel in (IMPL, Path("version") / "version"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(verl_copy / rel, root / rel)
    text = (root / IMPL).read_text().replace("micro_batch = micro_batch.to(get_device_id())",
                                             "micro_batch = micro_batch.to(get_device_id(), non_blocking=True)")
    (root / IMPL).write_text(text)
    for args in ((), ("--revert",), ("--check",)):
        result = trial("--verl-root", str(root), *args)
        assert result.returncode == 1 and result.stdout.startswith("MISMATCH "), result.stdout
        assert "found anchor 0, replacement 0, marker 0 times in 'def forward_step(" in result.stdout
    assert (root / IMPL).read_text() == text and not list(root.rglob(".patch-*"))


def test_other_verl_versions_and_missing_roots_are_bad_input(tmp_path):
    (tmp_path / "verl" / "version").mkdir(parents=True)
    (tmp_path / "verl" / "version" / "version").write_text("0.8.0\n")
    result = trial("--verl-root", str(tmp_path / "verl"))
    assert result.returncode == 2 and "verl 0.8.0 found; the hopper edits are for verl 0.9.1 only" in result.stderr
    assert trial("--verl-root", "").returncode == 2
    (tmp_path / "other").mkdir()  # no version/version file: patch_verl.py's own wording
    result = trial("--verl-root", str(tmp_path / "other"))
    assert result.returncode == 2 and "not a verl package directory (no version/version file)" in result.stderr

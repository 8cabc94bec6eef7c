"""scripts/patch_verl_hopper.py against the real verl 0.9.1 (.venvs/verl-0.9.1, no flash-attn, CPU):
the released `load_valuehead_model` cannot load a critic without flash-attn even when the config asks for
SDPA (verl #5210); the patched copy loads it with SDPA. The patch is idempotent, --check tells patched from
unpatched, and a changed function fails with MISMATCH and writes nothing."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "patch_verl_hopper.py"

LOAD = r"""
import importlib.util, sys, tempfile, torch
from transformers import AutoConfig, Qwen2Config, Qwen2ForCausalLM
path = tempfile.mkdtemp()
Qwen2ForCausalLM(Qwen2Config(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                             num_attention_heads=2, num_key_value_heads=1)).save_pretrained(path)
spec = importlib.util.spec_from_file_location("model_under_test", sys.argv[1])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
config = AutoConfig.from_pretrained(path, attn_implementation="sdpa")  # what verl builds from override_config
config.num_labels = 1
try:
    model = mod.load_valuehead_model(path, torch.float32, config, False)
    print("LOADED", type(model).__name__, model.config._attn_implementation)
except Exception as exc:
    print("FAILED", type(exc).__name__, str(exc).splitlines()[0][:120])
"""


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


@pytest.fixture
def verl_copy(tmp_path, verl_python) -> Path:
    python = verl_python("0.9.1")
    out = subprocess.run([str(python), "-c", "import importlib.util as u; print(u.find_spec('verl').submodule_search_locations[0])"],
                         capture_output=True, text=True, timeout=120, check=True)
    root = tmp_path / "verl"
    (root / "utils").mkdir(parents=True)
    shutil.copy2(Path(out.stdout.strip()) / "utils" / "model.py", root / "utils" / "model.py")
    return root


@pytest.mark.verl
def test_patch_makes_the_critic_load_with_sdpa(verl_copy, verl_python):
    model_py = verl_copy / "utils" / "model.py"
    load = [str(verl_python("0.9.1")), "-c", LOAD, str(model_py)]
    before = subprocess.run(load, capture_output=True, text=True, timeout=300)
    assert before.stdout.startswith("FAILED"), before.stdout + before.stderr[-2000:]

    assert run("--verl-root", str(verl_copy), "--check").returncode == 1
    first = run("--verl-root", str(verl_copy))
    assert first.returncode == 0 and first.stdout.startswith("PATCHED")
    second = run("--verl-root", str(verl_copy))
    assert second.returncode == 0 and second.stdout.startswith("ALREADY")
    assert run("--verl-root", str(verl_copy), "--check").returncode == 0

    after = subprocess.run(load, capture_output=True, text=True, timeout=300)
    assert after.stdout.split() == ["LOADED", "Qwen2ForTokenClassification", "sdpa"], after.stdout + after.stderr[-2000:]


def test_changed_function_is_a_mismatch_and_nothing_is_written(tmp_path):
    root = tmp_path / "verl"
    (root / "utils").mkdir(parents=True)
    text = ("def load_valuehead_model(local_path, torch_dtype, model_config, trust_remote_code):\n"
            '    return f(attn_implementation="flash_attention_2",\n)\n')
    (root / "utils" / "model.py").write_text(text)
    result = run("--verl-root", str(root))
    assert result.returncode == 1 and result.stdout.startswith("MISMATCH")
    assert (root / "utils" / "model.py").read_text() == text


def test_no_verl_is_exit_2(tmp_path):
    result = run("--verl-root", str(tmp_path / "nowhere"))
    assert result.returncode == 2 and "error" in result.stderr

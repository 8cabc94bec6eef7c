"""scripts/patch_verl_p40.py against the real verl 0.5.0 package (the one .venvs/verl-0.5.0 installed
from PyPI): every site found and changed, idempotent, patched modules compile and import on CPU without
flash-attn, and any anchor mismatch fails naming file and site with nothing written."""

from __future__ import annotations

import hashlib
import json
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "patch_verl_p40.py"

# The script imported as a module of the scripts/ namespace package (the repository root is on
# sys.path): the name under which mutation testing (make mutation) sees it too.
patch = importlib.import_module("scripts.patch_verl_p40")
assert Path(patch.__file__).resolve() == SCRIPT.resolve()

SITE_FILES = sorted({s.file for s in patch.SITES})
SITE_MODULES = [
    "verl.utils.model",
    "verl.workers.actor.dp_actor",
    "verl.workers.critic.dp_critic",
    "verl.workers.engine.fsdp.engine_impl",
    "verl.workers.rollout.hf_rollout",
    "verl.workers.fsdp_workers",
]


def run_patch(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts
    }


def site_lines(stdout: str) -> dict[str, str]:
    """{site name: state} from the script's per-site report lines."""
    states = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] in ("PATCHED", "ALREADY", "UNPATCHED", "MISMATCH"):
            states[parts[2].strip("[]")] = parts[0]
    return states


@pytest.fixture(scope="session")
def installed_verl_050(verl_python) -> Path:
    python = verl_python("0.5.0")
    out = subprocess.run(
        [str(python), "-c", "import importlib.util as u; print(next(iter(u.find_spec('verl').submodule_search_locations)))"],
        capture_output=True, text=True, check=True, timeout=60,
    )
    root = Path(out.stdout.strip())
    assert (root / "version" / "version").read_text().strip() == "0.5.0"
    return root


@pytest.fixture
def verl_copy(installed_verl_050, tmp_path) -> Path:
    """A pristine copy of the installed verl 0.5.0 package: tmp_path/site/verl."""
    dest = tmp_path / "site" / "verl"
    shutil.copytree(installed_verl_050, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


# --- pure logic, no verl needed ------------------------------------------------------------------

SITE = patch.Site("f.py", "demo", "why", "x = bf16\n", "# rlrecipes-p40\nx = fp32\n")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a\nx = bf16\nb\n", patch.TODO),
        ("a\n# rlrecipes-p40\nx = fp32\nb\n", patch.ALREADY),
        ("a\nx = fp16\nb\n", patch.MISMATCH),  # the line changed upstream
        ("x = bf16\nx = bf16\n", patch.MISMATCH),  # anchor ambiguous
        ("x = bf16\n# rlrecipes-p40\nx = fp32\n", patch.MISMATCH),  # half-patched twice
        ("", patch.MISMATCH),
    ],
)
def test_site_state(text, expected):
    state, detail = patch.site_state(text, SITE)
    assert state == expected
    # only a mismatch explains itself (the report prints the detail after the site name)
    assert (detail == "") == (expected != patch.MISMATCH)
    if expected == patch.MISMATCH:
        assert detail.startswith(f"anchor found {text.count(SITE.anchor)} times, patched text ")


def test_sites_are_recognisable_after_patching():
    names = [s.name for s in patch.SITES]
    assert len(names) == len(set(names))
    for site in patch.SITES:
        # a patched text that still contained its anchor would be patched again on the next run
        assert site.anchor not in site.patched, site.name
        assert patch.MARK in site.patched, site.name


@pytest.mark.parametrize("version_text, expected", [("0.6.1\n", "verl 0.6.1 found"), (None, "no version/version file")])
def test_refuses_other_verl_versions(tmp_path, version_text, expected):
    root = tmp_path / "verl"
    (root / "version").mkdir(parents=True)
    if version_text is not None:
        (root / "version" / "version").write_text(version_text)
    result = run_patch("--verl-root", str(root))
    assert result.returncode == 2
    assert expected in result.stderr


# --- against the real verl 0.5.0 package -----------------------------------------------------------

@pytest.mark.verl
def test_check_on_pristine_reports_every_site_unpatched_and_writes_nothing(verl_copy):
    before = tree_digest(verl_copy)
    result = run_patch("--verl-root", str(verl_copy), "--check")
    assert result.returncode == 1
    assert site_lines(result.stdout) == {s.name: "UNPATCHED" for s in patch.SITES}
    assert tree_digest(verl_copy) == before


@pytest.mark.verl
def test_patch_changes_every_site_then_nothing(verl_copy):
    before = tree_digest(verl_copy)
    first = run_patch("--verl-root", str(verl_copy))
    assert first.returncode == 0, first.stderr
    assert site_lines(first.stdout) == {s.name: "PATCHED" for s in patch.SITES}

    after = tree_digest(verl_copy)
    changed = sorted(k for k in before if before[k] != after[k])
    assert changed == SITE_FILES
    for site in patch.SITES:
        text = (verl_copy / site.file).read_text()
        assert text.count(site.patched) == 1 and site.anchor not in text, site.name
    assert 'attn_implementation="flash_attention_2"' not in (verl_copy / "utils/model.py").read_text()
    assert '"num_return_sequences": self.config.n' not in (verl_copy / "workers/rollout/hf_rollout.py").read_text()

    second = run_patch("--verl-root", str(verl_copy))
    assert second.returncode == 0, second.stderr
    assert site_lines(second.stdout) == {s.name: "ALREADY" for s in patch.SITES}
    assert "0 site(s) patched" in second.stdout
    assert tree_digest(verl_copy) == after

    check = run_patch("--verl-root", str(verl_copy), "--check")
    assert check.returncode == 0 and f"all {len(patch.SITES)} sites patched" in check.stdout


@pytest.mark.verl
def test_patched_files_compile_and_import_on_cpu_without_flash_attn(verl_copy, run_in_verl):
    pristine_site = str(verl_copy.parent)
    patched_root = verl_copy.parent.parent / "patched" / "verl"
    shutil.copytree(verl_copy, patched_root)
    assert run_patch("--verl-root", str(patched_root)).returncode == 0
    files = [str(patched_root / f) for f in SITE_FILES]
    # torch.cuda.is_available is forced True so that verl takes its CUDA import branch (the one that
    # imports flash_attn at module level) on this CPU-only machine.
    code = f"""
import importlib, importlib.util, py_compile, sys
sys.path.insert(0, sys.argv[1])
for f in {files!r}:
    py_compile.compile(f, doraise=True)
assert importlib.util.find_spec("flash_attn") is None, "flash_attn must be absent for this test"
import torch
torch.cuda.is_available = lambda: True
for name in {SITE_MODULES!r}:
    mod = importlib.import_module(name)
    assert mod.__file__.startswith(sys.argv[1]), mod.__file__
print("IMPORTED", len({SITE_MODULES!r}))
"""
    patched = run_in_verl("0.5.0", code.replace("sys.argv[1]", repr(str(patched_root.parent))))
    assert patched.returncode == 0, patched.stderr[-3000:]
    assert f"IMPORTED {len(SITE_MODULES)}" in patched.stdout

    # The same import of the unpatched package fails at the first site the P40 stack hits.
    pristine = run_in_verl("0.5.0", code.replace("sys.argv[1]", repr(pristine_site)).replace(repr(files), "[]"))
    assert pristine.returncode != 0
    assert "No module named 'flash_attn'" in pristine.stderr
    assert "workers/actor/dp_actor.py" in pristine.stderr


@pytest.mark.verl
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_patched_valuehead_loader_uses_the_configured_attention(verl_copy, run_in_verl, tmp_path, attn):
    assert run_patch("--verl-root", str(verl_copy)).returncode == 0
    code = f"""
import sys
sys.path.insert(0, {str(verl_copy.parent)!r})
import torch
from transformers import AutoConfig, Qwen2Config, Qwen2ForCausalLM
cfg = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                  num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
Qwen2ForCausalLM(cfg).save_pretrained({str(tmp_path / "m")!r})
from verl.utils.model import load_valuehead_model
config = AutoConfig.from_pretrained({str(tmp_path / "m")!r}, attn_implementation={attn!r})
config.num_labels = 1
model = load_valuehead_model({str(tmp_path / "m")!r}, torch.float32, config, False)
print("ATTN", type(model).__name__, model.config._attn_implementation)
"""
    result = run_in_verl("0.5.0", code)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"ATTN Qwen2ForTokenClassification {attn}" in result.stdout


@pytest.mark.verl
@pytest.mark.parametrize(
    "rel, old, new, site_name",
    [
        # a changed line (upstream edited the autocast)
        ("workers/rollout/hf_rollout.py", "device_type=get_device_name(), dtype=torch.bfloat16)",
         "device_type=get_device_name(), dtype=torch.float16)", "rollout-bf16-autocast"),
        # an ambiguous anchor (matched twice)
        ("workers/rollout/hf_rollout.py", '"num_return_sequences": self.config.n,\n',
         '"num_return_sequences": self.config.n,\n                "num_return_sequences": self.config.n,\n',
         "rollout-num-return-sequences"),
        # a moved import
        ("workers/critic/dp_critic.py", "    from flash_attn.bert_padding import",
         "    from flash_attn.bert_padding  import", "critic-flash-attn-import"),
    ],
)
def test_mismatch_fails_naming_file_and_site_and_writes_nothing(verl_copy, rel, old, new, site_name):
    target = verl_copy / rel
    text = target.read_text()
    assert text.count(old) == 1
    target.write_text(text.replace(old, new))
    before = tree_digest(verl_copy)

    result = run_patch("--verl-root", str(verl_copy))
    assert result.returncode == 1
    assert f"{rel} [{site_name}]" in result.stderr
    assert site_lines(result.stdout)[site_name] == "MISMATCH"
    # no other site was written either, even those in other files that did match
    assert tree_digest(verl_copy) == before


@pytest.mark.verl
def test_missing_site_file_is_a_mismatch(verl_copy):
    (verl_copy / "workers/engine/fsdp/engine_impl.py").unlink()
    before = tree_digest(verl_copy)
    result = run_patch("--verl-root", str(verl_copy))
    assert result.returncode == 1
    assert "workers/engine/fsdp/engine_impl.py [engine-flash-attn-import]: file not found" in result.stderr
    assert tree_digest(verl_copy) == before


@pytest.mark.verl
def test_skip_leaves_one_site_and_a_later_run_patches_only_it(verl_copy):
    first = run_patch("--verl-root", str(verl_copy), "--skip", "critic-attn-implementation")
    assert first.returncode == 0, first.stderr
    states = site_lines(first.stdout)
    assert states.pop("critic-attn-implementation") == "UNPATCHED"
    assert set(states.values()) == {"PATCHED"}
    text = (verl_copy / "workers/fsdp_workers.py").read_text()
    assert 'attn_implementation="flash_attention_2",\n            trust_remote_code=config.model' in text

    assert run_patch("--verl-root", str(verl_copy), "--check").returncode == 1
    second = run_patch("--verl-root", str(verl_copy))
    states = site_lines(second.stdout)
    assert states.pop("critic-attn-implementation") == "PATCHED"
    assert set(states.values()) == {"ALREADY"}
    assert "1 site(s) patched in 1 file(s); 11 already patched" in second.stdout


def test_skip_rejects_unknown_site_names(tmp_path):
    result = run_patch("--verl-root", str(tmp_path), "--skip", "no-such-site")
    assert result.returncode == 2 and "no-such-site" in result.stderr


# Where verl 0.5.0 hard-codes a bf16 autocast on the P40 path (read from verl 0.5.0's source, not
# from the patch's own table): file -> the functions that hold one.
AUTOCAST_SITES = {
    "workers/actor/dp_actor.py": ["_forward_micro_batch"],
    "workers/critic/dp_critic.py": ["_forward_micro_batch"],
    "workers/rollout/hf_rollout.py": ["_generate_minibatch"],
    "workers/fsdp_workers.py": ["_forward_micro_batch"],
}
AUTOCAST_PROBE = r"""
import ast, contextlib, importlib, json, sys, types
root, files = sys.argv[1], json.loads(sys.argv[2])
sys.path.insert(0, root)
import torch
out = []
for rel in files:
    module = importlib.import_module("verl." + rel[:-3].replace("/", "."))
    assert module.__file__.startswith(root), module.__file__
    source = open(module.__file__).read()
    tree = ast.parse(source)
    for func in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        for node in ast.walk(func):
            if not isinstance(node, ast.With):
                continue
            for item in node.items:
                call = item.context_expr
                if not (isinstance(call, ast.Call) and getattr(call.func, "attr", None) == "autocast"):
                    continue
                # The context expression exactly as verl wrote it, evaluated in the module's own
                # namespace with the device names the call sites use resolving to the CPU.
                expr = ast.get_source_segment(source, call)
                scope = {"self": types.SimpleNamespace(device_name="cpu"), "device_name": "cpu"}
                namespace = dict(vars(module), get_device_name=lambda: "cpu")
                a = torch.randn(8, 8, dtype=torch.float32)
                with eval(expr, namespace, scope):
                    enabled = torch.is_autocast_enabled("cpu")
                    dtype = str(torch.nn.functional.linear(a, a).dtype)
                out.append([rel, func.name, node.lineno, enabled, dtype])
print("PROBE" + json.dumps(out))
"""


def _autocast_probe(run_in_verl, root: Path) -> dict[tuple[str, str], tuple[bool, str]]:
    proc = run_in_verl("0.5.0", AUTOCAST_PROBE.replace("sys.argv[1], json.loads(sys.argv[2])",
                                                      f"{str(root)!r}, {sorted(AUTOCAST_SITES)!r}"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.split("PROBE", 1)[1])
    return {(rel, func): (enabled, dtype) for rel, func, _line, enabled, dtype in rows}


@pytest.mark.verl
def test_patched_autocast_sites_compute_in_fp32(verl_copy, run_in_verl):
    """Functional: each bf16 autocast on the P40 path, taken from the patched verl source and entered
    on the CPU, leaves autocast off and a matmul inside it in float32. Unpatched, the same probe
    sees bf16 -- so a site patched to `enabled=True` (or not at all) fails here."""
    expected = {(rel, func) for rel, funcs in AUTOCAST_SITES.items() for func in funcs}
    pristine = _autocast_probe(run_in_verl, verl_copy.parent)
    assert set(pristine) == expected
    assert all(value == (True, "torch.bfloat16") for value in pristine.values()), pristine

    assert run_patch("--verl-root", str(verl_copy)).returncode == 0
    patched = _autocast_probe(run_in_verl, verl_copy.parent)
    assert set(patched) == expected
    assert all(value == (False, "torch.float32") for value in patched.values()), patched

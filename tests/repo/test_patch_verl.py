"""scripts/patch_verl.py, the one engine for both images' anchored verl edits.

p40 (verl 0.5.0, .venvs/verl-0.5.0 as installed from PyPI): every edit found and applied, idempotent, the
patched modules compile and import on CPU without flash-attn, and any anchor mismatch fails naming file
and edit with nothing written.

hopper (verl 0.9.1, .venvs/verl-0.9.1, no flash-attn, no vLLM, CPU): critic-attn -- the released
`load_valuehead_model` cannot load a critic without flash-attn even when the config asks for SDPA
(verl #5210); the patched copy loads it with SDPA. rollout-skip-detokenize (verl PR #7679) -- the block
inserted into the real `vLLMHttpServer.generate`, run on its own, turns vLLM's detokenization off unless
string stop/bad_words need it or the caller chose. rows-on-host -- the patched real
`FSDPEngineWithLMHead.forward_step` leaves the per-row non-tensor fields (all but `multi_modal_inputs`) out of the
micro batch it copies to the device; its inserted lines, run on a TensorDict built as verl builds one, do so.
Every edit is idempotent, --check tells patched from unpatched, and a changed function fails with MISMATCH and
writes no file at all, not even the ones whose edits would apply."""

from __future__ import annotations

import ast
import codecs
import errno
import hashlib
import importlib
import json
import locale
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# one xdist worker runs this module: its module fixtures are built once (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("repo/test_patch_verl")

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "patch_verl.py"

# The script imported as a module of the scripts/ namespace package (the repository root is on
# sys.path): the name under which mutation testing (make mutation) sees it too.
patch = importlib.import_module("scripts.patch_verl")
assert Path(patch.__file__).resolve() == SCRIPT.resolve()

P40 = patch.IMAGES["p40"].edits
HOPPER = patch.IMAGES["hopper"].edits
A100 = patch.IMAGES["a100"].edits


def run_patch(image: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--image", image, *args], capture_output=True, text=True,
                          timeout=60)


def run_main(capsys, image: str, *args: str) -> subprocess.CompletedProcess:
    """The script's main() in this process (what mutation testing sees), as `run_patch` reports a program."""
    code = patch.main(["--image", image, *args])
    out = capsys.readouterr()
    return subprocess.CompletedProcess([str(SCRIPT), "--image", image, *args], code, out.out, out.err)


def states(result: subprocess.CompletedProcess, edits: tuple = HOPPER) -> dict[str, str]:
    """edit name -> the status its line printed (one line per edit, in table order, between the header
    line and the summary)."""
    lines = [line for line in result.stdout.splitlines()
             if line.split(" ", 1)[0] in (patch.PATCHED, patch.ALREADY, patch.UNPATCHED, patch.MISMATCH)]
    assert len(lines) == len(edits), result.stdout + result.stderr
    out = {}
    for edit, line in zip(edits, lines):
        status, path, name = line.split()[:3]
        assert name == edit.name and path.endswith(edit.file), line
        out[name] = status
    return out


def test_every_edit_is_recognisable_after_patching():
    for table in patch.IMAGES.values():
        names = [e.name for e in table.edits]
        assert len(names) == len(set(names))
        for edit in table.edits:
            # a marker found in another edit's text of the same file would count as a trace of this one
            for other in table.edits:
                if other is not edit and other.file == edit.file:
                    assert edit.marker not in other.replacement + other.anchor, (edit.name, other.name)


def test_image_is_required_and_chosen_from_the_tables(tmp_path, capsys):
    for argv in ([], ["--image", "h100"]):
        with pytest.raises(SystemExit) as exit_:
            patch.main(argv + ["--verl-root", str(tmp_path)])
        assert exit_.value.code == 2
    assert "--image" in capsys.readouterr().err


def test_a_file_as_verl_root_is_exit_2_and_nothing_else(tmp_path, capsys):
    f = tmp_path / "verl"
    f.write_text("")
    for image in sorted(patch.IMAGES):
        result = run_main(capsys, image, "--verl-root", str(f))
        assert (result.returncode, result.stdout) == (2, "")
        assert result.stderr == f"patch_verl: error: {f}: not a verl package directory (no version/version file)\n"


# === p40: verl 0.5.0 ===============================================================================

SITE_FILES = sorted({s.file for s in P40})
SITE_MODULES = [
    "verl.utils.model",
    "verl.workers.actor.dp_actor",
    "verl.workers.critic.dp_critic",
    "verl.workers.engine.fsdp.engine_impl",
    "verl.workers.rollout.hf_rollout",
    "verl.workers.fsdp_workers",
]


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts
    }


def site_lines(result: subprocess.CompletedProcess) -> dict[str, str]:
    """{edit name: state} from the p40 run's per-edit report lines."""
    return states(result, P40)


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

SITE = patch.Edit("demo", "f.py", "x = bf16\n", "# rlrecipes-p40\nx = fp32\n", "# rlrecipes-p40", "why")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a\nx = bf16\nb\n", patch.UNPATCHED),
        ("a\n# rlrecipes-p40\nx = fp32\nb\n", patch.ALREADY),
        ("a\nx = fp16\nb\n", patch.MISMATCH),  # the line changed upstream
        ("x = bf16\nx = bf16\n", patch.MISMATCH),  # anchor ambiguous
        ("x = bf16\n# rlrecipes-p40\nx = fp32\n", patch.MISMATCH),  # half-patched twice
        ("", patch.MISMATCH),
    ],
)
def test_site_state(text, expected):
    new, state, detail = patch.apply(text, SITE)
    assert state == expected
    assert (new != text) == (expected == patch.UNPATCHED)
    # only a mismatch explains itself (the report prints the detail after the edit's name)
    assert (detail == "") == (expected != patch.MISMATCH)
    if expected == patch.MISMATCH:
        assert detail.startswith(f"found anchor {text.count(SITE.anchor)}, replacement ")


@pytest.mark.parametrize(("text", "detail"), [
    ("a\nx = fp16\nb\n", "found anchor 0, replacement 0, marker 0 times in f.py (expected 1 site)"),
    ("x = bf16\nx = bf16\n", "found anchor 2, replacement 0, marker 0 times in f.py (expected 1 site)"),
    ("x = bf16\n# rlrecipes-p40\nx = fp32\n",
     "found anchor 1, replacement 1, marker 1 times in f.py (expected 1 site)"),
])
def test_mismatch_detail_of_a_whole_file_edit_names_its_file(text, detail):
    # an edit without `function` (every p40 edit) scopes the whole file: the detail names the file, not a def line
    assert patch.apply(text, SITE) == (text, patch.MISMATCH, detail)


@pytest.mark.parametrize("sites", [1, 2])
def test_a_replacement_carrying_its_marker_twice_is_already_applied_once_patched(sites):
    edit = patch.Edit("twice", "f.py", "x = bf16\n", "# rlrecipes-p40: a\nx = fp32  # rlrecipes-p40\n",
                      "# rlrecipes-p40", "why", sites=sites)
    text = "a\nx = bf16\nb\n" * sites
    new, state, detail = patch.apply(text, edit)
    patched = "a\n# rlrecipes-p40: a\nx = fp32  # rlrecipes-p40\nb\n" * sites
    assert (new, state, detail) == (patched, patch.UNPATCHED, "")
    assert patch.apply(new, edit) == (new, patch.ALREADY, "")
    # one marker more than the sites' replacements carry is a trace of something else: a mismatch
    stray = new + "y = 1  # rlrecipes-p40\n"
    assert patch.apply(stray, edit)[:2] == (stray, patch.MISMATCH)


def test_p40_edits_replace_their_anchor_outright():
    for site in P40:
        # a patched p40 file keeps none of the released lines it edited (the flash_attention_2 and bf16 ones)
        assert site.anchor not in site.replacement, site.name
        assert patch.P40_MARK in site.replacement, site.name


@pytest.mark.parametrize("image, version_text, expected", [
    ("p40", "0.6.1\n", "verl 0.6.1 found; the p40 edits are for verl 0.5.0 only"),
    ("p40", None, "no version/version file"),
    ("hopper", "0.5.0\n", "verl 0.5.0 found; the hopper edits are for verl 0.9.1 only"),
])
def test_refuses_other_verl_versions(tmp_path, image, version_text, expected):
    root = tmp_path / "verl"
    (root / "version").mkdir(parents=True)
    if version_text is not None:
        (root / "version" / "version").write_text(version_text)
    result = run_patch(image, "--verl-root", str(root))
    assert result.returncode == 2 and result.stdout == ""
    assert expected in result.stderr


# --- against the real verl 0.5.0 package -----------------------------------------------------------

@pytest.mark.verl
def test_check_on_pristine_reports_every_site_unpatched_and_writes_nothing(verl_copy):
    before = tree_digest(verl_copy)
    result = run_patch("p40", "--verl-root", str(verl_copy), "--check")
    assert result.returncode == 1
    assert site_lines(result) == {s.name: "UNPATCHED" for s in P40}
    assert tree_digest(verl_copy) == before


@pytest.mark.verl
def test_patch_changes_every_site_then_nothing(verl_copy):
    before = tree_digest(verl_copy)
    first = run_patch("p40", "--verl-root", str(verl_copy))
    assert first.returncode == 0, first.stderr
    assert site_lines(first) == {s.name: "PATCHED" for s in P40}

    after = tree_digest(verl_copy)
    changed = sorted(k for k in before if before[k] != after[k])
    assert changed == SITE_FILES
    for site in P40:
        text = (verl_copy / site.file).read_text()
        assert text.count(site.replacement) == 1 and site.anchor not in text, site.name
    assert 'attn_implementation="flash_attention_2"' not in (verl_copy / "utils/model.py").read_text()
    assert '"num_return_sequences": self.config.n' not in (verl_copy / "workers/rollout/hf_rollout.py").read_text()

    second = run_patch("p40", "--verl-root", str(verl_copy))
    assert second.returncode == 0, second.stderr
    assert site_lines(second) == {s.name: "ALREADY" for s in P40}
    assert "0 edit(s) patched in 0 file(s); 12 already patched" in second.stdout
    assert tree_digest(verl_copy) == after

    check = run_patch("p40", "--verl-root", str(verl_copy), "--check")
    assert check.returncode == 0 and f"all {len(P40)} edits applied" in check.stdout


@pytest.mark.verl
def test_patched_files_compile_and_import_on_cpu_without_flash_attn(verl_copy, run_in_verl):
    pristine_site = str(verl_copy.parent)
    patched_root = verl_copy.parent.parent / "patched" / "verl"
    shutil.copytree(verl_copy, patched_root)
    assert run_patch("p40", "--verl-root", str(patched_root)).returncode == 0
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
    assert run_patch("p40", "--verl-root", str(verl_copy)).returncode == 0
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

    result = run_patch("p40", "--verl-root", str(verl_copy))
    assert result.returncode == 1
    assert f"{rel} [{site_name}]" in result.stderr
    assert site_lines(result)[site_name] == "MISMATCH"
    assert "nothing written" in result.stderr
    # no other site was written either, even those in other files that did match
    assert tree_digest(verl_copy) == before


@pytest.mark.verl
def test_missing_site_file_is_a_mismatch(verl_copy):
    (verl_copy / "workers/engine/fsdp/engine_impl.py").unlink()
    before = tree_digest(verl_copy)
    result = run_patch("p40", "--verl-root", str(verl_copy))
    assert result.returncode == 1
    assert "workers/engine/fsdp/engine_impl.py [engine-flash-attn-import]: file not found" in result.stderr
    assert tree_digest(verl_copy) == before


@pytest.mark.verl
def test_skip_leaves_one_site_and_a_later_run_patches_only_it(verl_copy):
    first = run_patch("p40", "--verl-root", str(verl_copy), "--skip", "critic-attn-implementation")
    assert first.returncode == 0, first.stderr
    found = site_lines(first)
    assert found.pop("critic-attn-implementation") == "UNPATCHED"
    assert set(found.values()) == {"PATCHED"}
    assert "left unpatched on request: critic-attn-implementation" in first.stdout
    text = (verl_copy / "workers/fsdp_workers.py").read_text()
    assert 'attn_implementation="flash_attention_2",\n            trust_remote_code=config.model' in text

    assert run_patch("p40", "--verl-root", str(verl_copy), "--check").returncode == 1
    second = run_patch("p40", "--verl-root", str(verl_copy))
    found = site_lines(second)
    assert found.pop("critic-attn-implementation") == "PATCHED"
    assert set(found.values()) == {"ALREADY"}
    assert "1 edit(s) patched in 1 file(s); 11 already patched" in second.stdout


@pytest.mark.parametrize("image", ["p40", "hopper"])
def test_skip_rejects_unknown_site_names(tmp_path, image):
    result = run_patch(image, "--verl-root", str(tmp_path), "--skip", "no-such-site")
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

    assert run_patch("p40", "--verl-root", str(verl_copy)).returncode == 0
    patched = _autocast_probe(run_in_verl, verl_copy.parent)
    assert set(patched) == expected
    assert all(value == (False, "torch.float32") for value in patched.values()), patched


# === hopper: verl 0.9.1 ============================================================================

MODEL = Path("utils") / "model.py"
SERVER = Path("workers") / "rollout" / "vllm_rollout" / "vllm_async_server.py"
ENGINE = Path("workers") / "engine" / "fsdp" / "transformer_impl.py"
VERSION = Path("version") / "version"
MARKER = ('        if not sampling_params.get("stop") and not sampling_params.get("bad_words"):'
          "  # rlrecipes: verl PR #7679\n")

EDITS = {edit.name: edit for edit in HOPPER}

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
    return run_patch("hopper", *args)


@pytest.fixture
def verl_091_copy(tmp_path, verl_python) -> Path:
    python = verl_python("0.9.1")
    out = subprocess.run([str(python), "-c", "import importlib.util as u; print(u.find_spec('verl').submodule_search_locations[0])"],
                         capture_output=True, text=True, timeout=120, check=True)
    root = tmp_path / "verl"
    for rel in (MODEL, SERVER, ENGINE, VERSION):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(out.stdout.strip()) / rel, root / rel)
    return root


@pytest.mark.verl
def test_patch_makes_the_critic_load_with_sdpa(verl_091_copy, verl_python):
    model_py = verl_091_copy / MODEL
    load = [str(verl_python("0.9.1")), "-c", LOAD, str(model_py)]
    before = subprocess.run(load, capture_output=True, text=True, timeout=300)
    assert before.stdout.startswith("FAILED"), before.stdout + before.stderr[-2000:]

    check = run("--verl-root", str(verl_091_copy), "--check")
    assert check.returncode == 1 and states(check)["critic-attn"] == "UNPATCHED"
    first = run("--verl-root", str(verl_091_copy))
    assert first.returncode == 0 and set(states(first).values()) == {"PATCHED"}
    second = run("--verl-root", str(verl_091_copy))
    assert second.returncode == 0 and set(states(second).values()) == {"ALREADY"}
    assert run("--verl-root", str(verl_091_copy), "--check").returncode == 0

    after = subprocess.run(load, capture_output=True, text=True, timeout=300)
    assert after.stdout.split() == ["LOADED", "Qwen2ForTokenClassification", "sdpa"], after.stdout + after.stderr[-2000:]


def generate_of(tree: ast.Module) -> ast.AsyncFunctionDef:
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "vLLMHttpServer"]
    (gen,) = [n for n in cls.body if isinstance(n, ast.AsyncFunctionDef) and n.name == "generate"]
    return gen


def sampling_params_assignment(gen: ast.AsyncFunctionDef) -> int:
    """Index in generate's body of `sampling_params = SamplingParams(max_tokens=max_tokens, **sampling_params)`."""
    (index,) = [i for i, node in enumerate(gen.body)
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name) and node.value.func.id == "SamplingParams"
                and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["sampling_params"]]
    return index


def verl_files(tmp_path: Path, python: Path, *rels: Path) -> Path:
    """A verl package directory holding copies of `rels` (and its version file) from `python`'s verl."""
    out = subprocess.run([str(python), "-c", "import importlib.util as u; print(u.find_spec('verl').submodule_search_locations[0])"],
                         capture_output=True, text=True, timeout=120, check=True)
    root = tmp_path / "verl"
    for rel in (*rels, VERSION):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(out.stdout.strip()) / rel, root / rel)
    return root


@pytest.mark.verl
@pytest.mark.parametrize(("image", "version"), [("hopper", "0.9.1"), ("a100", "0.8.0")])
def test_detokenize_edit_on_the_real_generate(tmp_path, verl_python, image, version):
    # the hopper table edits the FSDP engine too; verl 0.8.0's a100 table only the server
    root = verl_files(tmp_path, verl_python(version), MODEL, SERVER, *([ENGINE] if image == "hopper" else []))
    edits = patch.IMAGES[image].edits
    server = root / SERVER
    original = server.read_text()
    gen = generate_of(ast.parse(original))
    assert "detokenize" not in ast.get_source_segment(original, gen)  # the released verl: vLLM detokenizes

    check = run_patch(image, "--verl-root", str(root), "--check")
    assert check.returncode == 1 and states(check, edits)["rollout-skip-detokenize"] == "UNPATCHED"
    first = run_patch(image, "--verl-root", str(root))
    assert first.returncode == 0 and states(first, edits)["rollout-skip-detokenize"] == "PATCHED"
    patched = server.read_text()
    again = run_patch(image, "--verl-root", str(root))
    assert again.returncode == 0 and states(again, edits)["rollout-skip-detokenize"] == "ALREADY"
    assert server.read_text() == patched
    assert run_patch(image, "--verl-root", str(root), "--check").returncode == 0

    # Exactly two lines were inserted, right before the SamplingParams(...) line, and nothing else changed.
    old, new = original.splitlines(keepends=True), patched.splitlines(keepends=True)
    at = old.index("        sampling_params = SamplingParams(max_tokens=max_tokens, **sampling_params)\n")
    assert new == old[:at] + [MARKER, '            sampling_params.setdefault("detokenize", False)\n'] + old[at:]

    # The patched module parses; the inserted `if` is a statement of generate's own body, right before the
    # SamplingParams assignment; run on its own it decides `detokenize` as verl PR #7679 does.
    tree = ast.parse(patched)
    gen = generate_of(tree)
    index = sampling_params_assignment(gen)
    block = gen.body[index - 1]
    assert isinstance(block, ast.If) and block.lineno == at + 1 and gen.body[index].lineno == at + 3
    code = compile(ast.Module(body=[block], type_ignores=[]), str(server), "exec")

    def decide(params: dict) -> dict:
        scope = {"sampling_params": dict(params)}
        exec(code, scope)  # noqa: S102 -- the two inserted lines of the real, patched file
        return scope["sampling_params"]

    assert decide({}) == {"detokenize": False}
    assert decide({"temperature": 1.0, "logprobs": 0, "stop_token_ids": [2]}) == {
        "temperature": 1.0, "logprobs": 0, "stop_token_ids": [2], "detokenize": False}
    assert decide({"stop": []}) == {"stop": [], "detokenize": False}  # no stop string, nothing to match
    assert decide({"stop": ["</answer>"]}) == {"stop": ["</answer>"]}
    assert decide({"stop": "</answer>"}) == {"stop": "</answer>"}
    assert decide({"bad_words": ["x"]}) == {"bad_words": ["x"]}
    assert decide({"detokenize": True}) == {"detokenize": True}
    # what generate reads of vLLM's answer is tokens, not text: nothing downstream needs the detokenized string
    body = ast.get_source_segment(patched, gen)
    assert "outputs[0].token_ids" in body and "outputs[0].text" not in body


def forward_step_of(tree: ast.Module) -> ast.FunctionDef:
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "FSDPEngineWithLMHead"]
    (step,) = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward_step"]
    return step


# The statements the rows-on-host edit put in place of the copy to the device (sys.argv[1]), run in verl
# 0.9.1's interpreter on a micro batch built as verl builds one: tensors, per-row lists, one meta value.
ROWS_PROBE = r"""
import json, sys, torch
from verl.utils import tensordict_utils as tu
batch = tu.get_tensordict(
    tensor_dict={"input_ids": torch.arange(8).view(4, 2), "data_source": ["a", "b", "c", "d"],
                 "raw_prompt": [[{"role": "user", "content": str(i)}] for i in range(4)],
                 "multi_modal_inputs": [{"pixel_values": i} for i in range(4)]},
    non_tensor_dict={"temperature": 1.0})
scope = {"micro_batch": batch, "get_device_id": lambda: "cpu"}
exec(sys.argv[1], scope)
moved = scope["micro_batch"]
print("ROWS" + json.dumps({"rows": sorted(scope["rows"]), "moved": sorted(moved.keys()),
                           "kept": sorted(batch.keys()), "same": moved is batch,
                           "input_ids": moved["input_ids"].tolist(), "temperature": moved["temperature"]}))
"""


@pytest.mark.verl
def test_rows_on_host_edit_on_the_real_forward_step(tmp_path, verl_python, run_in_verl):
    root = verl_files(tmp_path, verl_python("0.9.1"), MODEL, SERVER, ENGINE)
    engine = root / ENGINE
    original = engine.read_text()
    step = ast.get_source_segment(original, forward_step_of(ast.parse(original)))
    assert TO_DEVICE_LINE in step and "exclude" not in step  # the released verl: every field goes to the GPU

    check = run("--verl-root", str(root), "--check")
    assert check.returncode == 1 and states(check)["rows-on-host"] == "UNPATCHED"
    first = run("--verl-root", str(root))
    assert first.returncode == 0 and states(first)["rows-on-host"] == "PATCHED", first.stdout + first.stderr
    patched = engine.read_text()
    again = run("--verl-root", str(root))
    assert again.returncode == 0 and states(again)["rows-on-host"] == "ALREADY"
    assert engine.read_text() == patched
    assert run("--verl-root", str(root), "--check").returncode == 0

    # Only the one line was replaced, in FSDPEngineWithLMHead.forward_step (the base class's raises, untouched).
    edit = EDITS["rows-on-host"]
    old, new = original.splitlines(keepends=True), patched.splitlines(keepends=True)
    at = old.index(TO_DEVICE_LINE)
    assert old.count(TO_DEVICE_LINE) == 1
    lines = edit.replacement.removeprefix("\n").splitlines(keepends=True)  # the anchor starts at the line before's end
    assert new == old[:at] + lines + old[at + 1:]

    # The patched module compiles; forward_step copies the batch without its per-row fields.
    compile(patched, str(engine), "exec")
    node = forward_step_of(ast.parse(patched))
    body = ast.get_source_segment(patched, node)
    assert "micro_batch = micro_batch.exclude(*rows).to(get_device_id())" in body
    assert "micro_batch = micro_batch.to(get_device_id())" not in body
    inserted = [stmt for stmt in node.body if at < stmt.lineno <= at + len(lines)]
    assert [type(stmt).__name__ for stmt in inserted] == ["ImportFrom", "Assign", "Assign"]
    code = "\n".join(ast.get_source_segment(patched, stmt) for stmt in inserted)
    probe = run_in_verl("0.9.1", ROWS_PROBE.replace("sys.argv[1]", repr(code)))
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert json.loads(probe.stdout.split("ROWS", 1)[1]) == {
        "rows": ["data_source", "raw_prompt"],  # per-row, not read by the engine: left on the host
        "moved": ["input_ids", "multi_modal_inputs", "temperature"],
        "kept": ["data_source", "input_ids", "multi_modal_inputs", "raw_prompt", "temperature"],  # the worker's
        "same": False, "input_ids": [[0, 1], [2, 3], [4, 5], [6, 7]], "temperature": 1.0}


def test_the_a100_table_is_the_hopper_detokenize_edit_alone():
    assert A100 == (patch.DETOKENIZE,) and patch.DETOKENIZE in HOPPER
    assert patch.IMAGES["a100"].verl == "0.8.0"


# A stand-in for the three verl files: the real anchors in functions shaped like verl 0.9.1's.
FAKE_MODEL = '''\
import torch


def load_valuehead_model(local_path, torch_dtype, model_config, trust_remote_code):
    try:
        return f(
            attn_implementation="flash_attention_2",
        )
    except ValueError:
        return g(
        attn_implementation="flash_attention_2",
        )


def other():
    return h(attn_implementation="flash_attention_2",
)
'''

FAKE_SERVER = '''\
class vLLMHttpServer:
    def __init__(self):
        self.config = {}

    async def generate(
        self,
        sampling_params,
    ):
        max_tokens = 1
        sampling_params = SamplingParams(max_tokens=max_tokens, **sampling_params)
        return sampling_params

    async def wake_up(self):
        pass
'''
SAMPLING_LINE = "        sampling_params = SamplingParams(max_tokens=max_tokens, **sampling_params)\n"

FAKE_ENGINE = '''\
from tensordict import TensorDict

from verl.utils.device import get_device_id, get_device_name


class FSDPEngine:
    def forward_step(self, micro_batch: TensorDict, loss_function, forward_only):
        raise NotImplementedError("forward_step must be implemented in subclass")


class FSDPEngineWithLMHead(FSDPEngine):
    def forward_step(self, micro_batch: TensorDict, loss_function, forward_only):
        device_name = get_device_name()
        micro_batch = micro_batch.to(get_device_id())
        model_inputs, output_args = self.prepare_model_inputs(micro_batch=micro_batch)
        return self.module(**model_inputs), device_name


class FSDPEngineWithValueHead(FSDPEngineWithLMHead):
    def prepare_model_outputs(self, output, output_args, micro_batch: TensorDict, logits_processor_func):
        return output
'''
TO_DEVICE_LINE = "        micro_batch = micro_batch.to(get_device_id())\n"
RAISE_LINE = '        raise NotImplementedError("forward_step must be implemented in subclass")\n'


def fake_root(tmp_path, model: str = FAKE_MODEL, server: str = FAKE_SERVER, engine: str = FAKE_ENGINE) -> Path:
    root = tmp_path / "verl"
    for rel, text in ((MODEL, model), (SERVER, server), (ENGINE, engine), (VERSION, "0.9.1\n")):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def test_the_stand_in_files_patch(tmp_path):
    root = fake_root(tmp_path)
    result = run("--verl-root", str(root))
    assert result.returncode == 0 and set(states(result).values()) == {"PATCHED"}, result.stdout
    model = (root / MODEL).read_text()
    assert model.count("# rlrecipes: verl #5210") == 2 and 'h(attn_implementation="flash_attention_2",' in model
    server = (root / SERVER).read_text()
    assert MARKER + '            sampling_params.setdefault("detokenize", False)\n' + SAMPLING_LINE in server
    ast.parse(server)
    engine = (root / ENGINE).read_text()
    assert engine == FAKE_ENGINE.replace("\n" + TO_DEVICE_LINE, EDITS["rows-on-host"].replacement)
    assert engine.count("# rlrecipes: rows-on-host") == 1 and TO_DEVICE_LINE not in engine
    ast.parse(engine)


@pytest.mark.parametrize("broken", ["generate", "critic", "engine"])
def test_one_mismatch_writes_neither_file(tmp_path, capsys, broken):
    model, server, engine = FAKE_MODEL, FAKE_SERVER, FAKE_ENGINE
    if broken == "generate":  # a changed SamplingParams(...) call: the anchor is gone
        server = server.replace(SAMPLING_LINE, SAMPLING_LINE.replace("max_tokens,", "max_tokens, n=1,"))
    elif broken == "critic":  # one of the two critic sites is gone
        model = model.replace('            attn_implementation="flash_attention_2",\n', "")
    else:  # the copy to the device moved upstream: the anchor is gone
        engine = engine.replace(TO_DEVICE_LINE, TO_DEVICE_LINE.replace("get_device_id()", "device_name"))
    root = fake_root(tmp_path, model, server, engine)
    result = run_main(capsys, "hopper", "--verl-root", str(root))
    want = {"critic-attn": "MISMATCH" if broken == "critic" else "UNPATCHED",
            "rollout-skip-detokenize": "MISMATCH" if broken == "generate" else "UNPATCHED",
            "rows-on-host": "MISMATCH" if broken == "engine" else "UNPATCHED"}
    assert result.returncode == 1 and states(result) == want, result.stdout
    assert "nothing written" in result.stderr
    assert (root / MODEL).read_text() == model and (root / SERVER).read_text() == server
    assert (root / ENGINE).read_text() == engine
    assert sorted(p.name for p in root.rglob(".patch-*")) == []
    assert run_main(capsys, "hopper", "--verl-root", str(root), "--check").returncode == 1


@pytest.mark.parametrize(("server", "state"), [
    (FAKE_SERVER, "UNPATCHED"),
    # the line in another method only
    (FAKE_SERVER.replace(SAMPLING_LINE, "").replace("        pass\n", SAMPLING_LINE), "MISMATCH"),
    # generate in another class
    (FAKE_SERVER.replace("class vLLMHttpServer:", "class SGLangHttpServer:"), "MISMATCH"),
    # generate twice
    (FAKE_SERVER + FAKE_SERVER.replace("class vLLMHttpServer:\n", ""), "MISMATCH"),
    # the line twice in generate
    (FAKE_SERVER.replace(SAMPLING_LINE, SAMPLING_LINE * 2), "MISMATCH"),
    # the line nested deeper (another indentation) is not the anchor
    (FAKE_SERVER.replace(SAMPLING_LINE, "        if True:\n    " + SAMPLING_LINE), "MISMATCH"),
    # patched before
    (FAKE_SERVER.replace(SAMPLING_LINE, MARKER + '            sampling_params.setdefault("detokenize", False)\n'
                         + SAMPLING_LINE), "ALREADY"),
    # the marker, but not right before the line
    (FAKE_SERVER.replace(SAMPLING_LINE, MARKER + '            sampling_params.setdefault("detokenize", False)\n'
                         + "        max_tokens = 2\n" + SAMPLING_LINE), "MISMATCH"),
])
def test_detokenize_anchor_is_the_line_in_vllm_http_server_generate(server, state):
    new, got, _ = patch.apply(server, EDITS["rollout-skip-detokenize"])
    assert got == state
    if state == "UNPATCHED":
        ast.parse(new)
        assert patch.apply(new, EDITS["rollout-skip-detokenize"])[1] == "ALREADY"
    else:
        assert new == server


ROWS_PATCHED = FAKE_ENGINE.replace("\n" + TO_DEVICE_LINE, EDITS["rows-on-host"].replacement)


@pytest.mark.parametrize(("engine", "state"), [
    (FAKE_ENGINE, "UNPATCHED"),
    # the line in the base class's forward_step only
    (FAKE_ENGINE.replace(TO_DEVICE_LINE, "").replace(RAISE_LINE, TO_DEVICE_LINE + RAISE_LINE), "MISMATCH"),
    # the line twice in FSDPEngineWithLMHead.forward_step
    (FAKE_ENGINE.replace(TO_DEVICE_LINE, TO_DEVICE_LINE * 2), "MISMATCH"),
    # the line nested deeper (another indentation) is not the anchor: patching it would break the block
    (FAKE_ENGINE.replace(TO_DEVICE_LINE, "        if True:\n    " + TO_DEVICE_LINE), "MISMATCH"),
    # the line also in a subclass's method: outside FSDPEngineWithLMHead, not counted, left as it is
    (FAKE_ENGINE.replace("        return output\n", TO_DEVICE_LINE + "        return output\n"), "UNPATCHED"),
    # forward_step in another class
    (FAKE_ENGINE.replace("class FSDPEngineWithLMHead(FSDPEngine):", "class FSDPEngineWithLMHeadV2(FSDPEngine):"),
     "MISMATCH"),
    # patched before
    (ROWS_PATCHED, "ALREADY"),
    # the marker alone, the line as released
    (FAKE_ENGINE.replace(TO_DEVICE_LINE, "        # rlrecipes: rows-on-host\n" + TO_DEVICE_LINE), "MISMATCH"),
    # patched, and the released line back beside it
    (ROWS_PATCHED.replace("        model_inputs, ", TO_DEVICE_LINE + "        model_inputs, "), "MISMATCH"),
])
def test_rows_on_host_anchor_is_the_line_in_fsdp_engine_with_lm_head_forward_step(engine, state):
    edit = EDITS["rows-on-host"]
    new, got, _ = patch.apply(engine, edit)
    assert got == state
    if state == "UNPATCHED":
        ast.parse(new)
        assert new.count(edit.marker) == 1 and new.count(TO_DEVICE_LINE) == engine.count(TO_DEVICE_LINE) - 1
        assert new.index(edit.marker) > new.index("class FSDPEngineWithLMHead(FSDPEngine):")
        assert new.index(edit.marker) < new.index("class FSDPEngineWithValueHead(")
        assert patch.apply(new, edit) == (new, "ALREADY", "")
    else:
        assert new == engine


def test_changed_function_is_a_mismatch_and_nothing_is_written(tmp_path, capsys):
    text = ("def load_valuehead_model(local_path, torch_dtype, model_config, trust_remote_code):\n"
            '    return f(attn_implementation="flash_attention_2",\n)\n')
    root = fake_root(tmp_path, model=text)
    result = run_main(capsys, "hopper", "--verl-root", str(root))
    assert result.returncode == 1 and states(result)["critic-attn"] == "MISMATCH"
    assert (root / MODEL).read_text() == text and (root / SERVER).read_text() == FAKE_SERVER
    assert (root / ENGINE).read_text() == FAKE_ENGINE


# In-process runs of main() and apply() (test_the_stand_in_files_patch and the verl-marked tests run the script
# as a program): the status lines' details, the critic edit's ALREADY state and the scope rules.
def test_main_in_process_patches_then_reports_already_with_bare_status_lines(tmp_path, capsys):
    root = fake_root(tmp_path)
    first = run_main(capsys, "hopper", "--verl-root", str(root))
    assert first.returncode == 0 and first.stdout.splitlines() == [
        f"verl 0.9.1 at {root} (hopper edits)",
        f"PATCHED {root / MODEL} critic-attn (verl #5210)",
        f"PATCHED {root / SERVER} rollout-skip-detokenize (verl PR #7679)",
        f"PATCHED {root / ENGINE} rows-on-host (per-row non-tensor fields copied to the GPU row by row)",
        "3 edit(s) patched in 3 file(s); 0 already patched",
    ] and first.stderr == ""
    patched = {rel: (root / rel).read_text() for rel in (MODEL, SERVER, ENGINE)}
    again = run_main(capsys, "hopper", "--verl-root", str(root))
    assert again.returncode == 0 and set(states(again).values()) == {"ALREADY"}
    assert run_main(capsys, "hopper", "--verl-root", str(root), "--check").returncode == 0
    assert {rel: (root / rel).read_text() for rel in (MODEL, SERVER, ENGINE)} == patched


def test_mismatch_details_name_the_counts_and_the_expected_sites(tmp_path, capsys):
    model = FAKE_MODEL.replace('            attn_implementation="flash_attention_2",\n', "")  # one site of two left
    server = FAKE_SERVER.replace("class vLLMHttpServer:", "class SGLangHttpServer:")
    root = fake_root(tmp_path, model, server)
    result = run_main(capsys, "hopper", "--verl-root", str(root))
    critic = ("found anchor 1, replacement 0, marker 0 times in "
              "'def load_valuehead_model(local_path, torch_dtype, model_config, trust_remote_code):' "
              "(expected 2 sites)")
    generate = "class vLLMHttpServer: 'async def generate(' not found exactly once"
    assert result.returncode == 1 and result.stdout.splitlines() == [
        f"verl 0.9.1 at {root} (hopper edits)",
        f"MISMATCH {root / MODEL} critic-attn (verl #5210): {critic}",
        f"MISMATCH {root / SERVER} rollout-skip-detokenize (verl PR #7679): {generate}",
        # an edit that matches is reported unpatched: nothing is written when another one mismatches
        f"UNPATCHED {root / ENGINE} rows-on-host (per-row non-tensor fields copied to the GPU row by row)",
    ]
    assert result.stderr.splitlines() == [
        "patch_verl: 2 edit(s) do not match verl 0.9.1 as released; nothing written:",
        f"  {MODEL.as_posix()} [critic-attn]: {critic}",
        f"  {SERVER.as_posix()} [rollout-skip-detokenize]: {generate}",
    ]
    assert (root / MODEL).read_text() == model and (root / SERVER).read_text() == server
    assert (root / ENGINE).read_text() == FAKE_ENGINE


def test_mismatch_detail_of_a_one_site_edit_is_singular():
    server = FAKE_SERVER.replace(SAMPLING_LINE, SAMPLING_LINE * 2)
    new, state, detail = patch.apply(server, EDITS["rollout-skip-detokenize"])
    assert (new, state) == (server, "MISMATCH")
    assert detail == "found anchor 2, replacement 0, marker 0 times in 'async def generate(' (expected 1 site)"
    engine = FAKE_ENGINE.replace(TO_DEVICE_LINE, TO_DEVICE_LINE * 2)
    assert patch.apply(engine, EDITS["rows-on-host"]) == (engine, "MISMATCH", (
        "found anchor 2, replacement 0, marker 0 times in "
        "'def forward_step(self, micro_batch: TensorDict, loss_function, forward_only):' (expected 1 site)"))


def test_module_level_function_at_the_very_start_of_the_file_and_its_already_state():
    text = FAKE_MODEL.replace("import torch\n\n\n", "")
    assert text.startswith("def load_valuehead_model(")
    new, state, detail = patch.apply(text, EDITS["critic-attn"])
    assert (state, detail) == ("UNPATCHED", "") and new.count("# rlrecipes: verl #5210") == 2
    assert patch.apply(new, EDITS["critic-attn"]) == (new, "ALREADY", "")


def test_the_method_is_looked_up_inside_its_class_only():
    # the same `async def generate(` line in another class after it: only vLLMHttpServer's is edited
    other = FAKE_SERVER.replace("class vLLMHttpServer:", "class SGLangHttpServer:")
    text = FAKE_SERVER + "\n\n" + other
    new, state, _ = patch.apply(text, EDITS["rollout-skip-detokenize"])
    assert state == "UNPATCHED"
    assert new.count("# rlrecipes: verl PR #7679") == 1 and new.endswith(other)
    assert new.index("# rlrecipes: verl PR #7679") < new.index("class SGLangHttpServer:")


@pytest.mark.parametrize(("anchors", "done", "state"), [
    (2, 0, "UNPATCHED"),
    (0, 2, "ALREADY"),
    (1, 0, "MISMATCH"),  # a site gone
    (3, 0, "MISMATCH"),  # a site more
    (1, 1, "MISMATCH"),  # half patched
    (2, 1, "MISMATCH"),  # patched and an anchor still there
    (0, 1, "MISMATCH"),
    (0, 3, "MISMATCH"),
])
def test_state_of_counts_anchor_and_replacement_sites(anchors, done, state):
    edit = EDITS["critic-attn"]  # 2 sites; its replacement does not contain its anchor
    body = edit.function + "".join(f"    x = f({edit.anchor}    )\n" for _ in range(anchors)) + \
        "".join(f"    y = g({edit.replacement}    )\n" for _ in range(done))
    assert patch.state_of(body, edit) == state


def test_state_of_a_stray_marker_is_a_mismatch():
    edit = EDITS["critic-attn"]
    body = edit.function + f"    x = f({edit.anchor}    )\n" * 2 + f"    pass  {edit.marker}\n"
    assert patch.state_of(body, edit) == "MISMATCH"


@pytest.mark.parametrize(("replacement", "sites", "ok"), [
    ("x  # rlrecipes: verl #1\n", 1, True),
    ("x  # rlrecipes: verl #1\n", 3, True),
    ("x  # rlrecipes: verl #1\n", 0, False),
    ("x  # verl #1\n", 1, False),  # no marker: a patched site could not be told from a changed one
])
def test_an_edit_must_carry_its_marker_at_one_site_or_more(replacement, sites, ok):
    def make():
        return patch.Edit(name="e", file="f.py", function="def f():\n", anchor="y\n", replacement=replacement,
                          marker="# rlrecipes: verl #1", why="verl #1", sites=sites)
    if ok:
        assert make().marker == "# rlrecipes: verl #1"
    else:
        with pytest.raises(ValueError, match=r"edit e: its replacement must carry '# rlrecipes: verl #1', at >= 1 site"):
            make()


def test_a_module_level_function_not_found_is_named_without_a_class(tmp_path):
    text = FAKE_MODEL.replace("def load_valuehead_model(", "def load_value_head_model(")
    assert patch.apply(text, EDITS["critic-attn"]) == (
        text, "MISMATCH",
        "'def load_valuehead_model(local_path, torch_dtype, model_config, trust_remote_code):' not found exactly once")


def test_check_in_process_writes_nothing_and_says_unpatched(tmp_path, capsys):
    root = fake_root(tmp_path)
    check = run_main(capsys, "hopper", "--verl-root", str(root), "--check")
    assert check.returncode == 1 and set(states(check).values()) == {"UNPATCHED"}
    assert (root / MODEL).read_text() == FAKE_MODEL and (root / SERVER).read_text() == FAKE_SERVER
    assert (root / ENGINE).read_text() == FAKE_ENGINE
    assert check.stderr == "3 of 3 edit(s) unpatched; run without --check to patch\n"


def test_a_missing_verl_in_process_is_exit_2_naming_the_directory(tmp_path, capsys):
    result = run_main(capsys, "hopper", "--verl-root", str(tmp_path / "nowhere"))
    assert result.returncode == 2 and result.stdout == "" and result.stderr.startswith("patch_verl: error: ")
    assert f"{tmp_path / 'nowhere'}: not a verl package directory" in result.stderr
    for image in sorted(patch.IMAGES):  # not the importable verl: an unset variable is an error
        empty = run_main(capsys, image, "--verl-root", "")
        assert (empty.returncode, empty.stdout, empty.stderr) == (2, "", "patch_verl: error: --verl-root is empty\n")


@pytest.mark.parametrize("missing", [MODEL, SERVER, ENGINE], ids=["model", "server", "engine"])
def test_a_missing_site_file_in_process_is_a_mismatch_and_nothing_is_written(tmp_path, capsys, missing):
    # the first edit's file missing too: the edits after it are still checked and reported
    root = fake_root(tmp_path)
    (root / missing).unlink()
    result = run_main(capsys, "hopper", "--verl-root", str(root))
    gone = {MODEL: "critic-attn", SERVER: "rollout-skip-detokenize", ENGINE: "rows-on-host"}[missing]
    assert result.returncode == 1
    assert states(result) == {name: "MISMATCH" if name == gone else "UNPATCHED" for name in EDITS}
    assert result.stderr.splitlines() == [
        "patch_verl: 1 edit(s) do not match verl 0.9.1 as released; nothing written:",
        f"  {missing.as_posix()} [{gone}]: file not found: {root / missing}",
    ]
    originals = {MODEL: FAKE_MODEL, SERVER: FAKE_SERVER, ENGINE: FAKE_ENGINE}
    assert {rel: (root / rel).read_text() for rel in originals if rel != missing} == {
        rel: text for rel, text in originals.items() if rel != missing}


def test_verl_root_is_the_importable_verl_package(tmp_path, monkeypatch):
    (tmp_path / "pkg" / "verl").mkdir(parents=True)
    (tmp_path / "pkg" / "verl" / "__init__.py").write_text("")
    (tmp_path / "mod").mkdir()
    (tmp_path / "mod" / "verl.py").write_text("")  # a plain module named verl is not the package
    monkeypatch.delitem(sys.modules, "verl", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))
    assert patch.verl_root(None) == tmp_path / "pkg" / "verl"
    assert patch.verl_root(str(tmp_path / "x")) == tmp_path / "x"
    monkeypatch.syspath_prepend(str(tmp_path / "mod"))
    with pytest.raises(FileNotFoundError, match="^no verl package importable here$"):
        patch.verl_root(None)
    monkeypatch.setattr(patch.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="^no verl package importable here$"):
        patch.verl_root(None)


def test_write_atomically_renames_a_temp_file_beside_the_target_keeping_its_mode(tmp_path, monkeypatch):
    target = tmp_path / "sub" / "f.py"
    target.parent.mkdir()
    target.write_text("old\n")
    target.chmod(0o640)
    renames = []
    real = os.replace
    monkeypatch.setattr(patch.os, "replace", lambda src, dst: (renames.append((Path(src), Path(dst))), real(src, dst)))
    patch.write_atomically(target, "new\n")
    assert target.read_text() == "new\n" and (target.stat().st_mode & 0o777) == 0o640
    [(src, dst)] = renames
    # beside the target, named `.patch-<name>.<random>.tmp`: a leftover of a killed build reads as a temp file
    assert dst == target and src.parent == target.parent and re.fullmatch(r"\.patch-f\.py\.[a-z0-9_]+\.tmp", src.name)
    assert sorted(p.name for p in target.parent.iterdir()) == ["f.py"]


def test_help_names_the_options(capsys):
    with pytest.raises(SystemExit) as exit_:
        patch.main(["--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps to the terminal's width
    usage, _prog, rest = text.split(" ", 2)  # _prog: the running program's name
    # the description is the docstring's first paragraph only; every option's metavar and help in full
    assert usage == "usage:" and rest == (
        "[-h] --image {a100,hopper,p40} [--check] [--verl-root VERL_ROOT] [--skip EDIT] "
        "Anchored edits to the installed verl, one table of edits per image, applied at image build time. "
        "options: -h, --help show this help message and exit "
        "--image {a100,hopper,p40} whose table of edits: p40 (verl 0.5.0), hopper (verl 0.9.1) or a100 (verl 0.8.0) "
        "--check change nothing; exit 1 unless every edit is applied "
        "--verl-root VERL_ROOT the verl package directory (default: the importable verl) "
        "--skip EDIT leave this edit unapplied (repeatable): to show what fails without it")


def test_a_failed_write_leaves_the_target_as_it_was_and_no_temp_file(tmp_path, monkeypatch):
    target = tmp_path / "f.py"
    target.write_text("old\n")

    def fsync(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(patch.os, "fsync", fsync)
    with pytest.raises(OSError, match=r"^\[Errno 5\] Input/output error$"):
        patch.write_atomically(target, "new\n")
    assert target.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["f.py"]


@pytest.fixture
def ascii_locale():
    """A locale whose codec is not UTF-8 (the C locale's ASCII, as with LC_ALL=C and PYTHONUTF8=0) as the default
    of every open() and read_text() not given an encoding."""
    if sys.flags.utf8_mode:
        pytest.skip("Python's UTF-8 mode is on: the locale does not choose the codec")
    saved = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        assert codecs.lookup(locale.getpreferredencoding(False)).name == "ascii"
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, saved)


def test_verl_files_are_read_and_written_as_utf8_whatever_the_locale(tmp_path, capsys, ascii_locale):
    model = FAKE_MODEL.replace("import torch\n", "import torch  # \u201cflash\u201d attention \u2014 \u2713\n")
    root = fake_root(tmp_path, model)
    result = run_main(capsys, "hopper", "--verl-root", str(root))
    assert result.returncode == 0 and set(states(result).values()) == {"PATCHED"}, result.stdout + result.stderr
    assert (root / MODEL).read_bytes() == patch.apply(model, EDITS["critic-attn"])[0].encode("utf-8")
    assert sorted(p.name for p in root.rglob(".patch-*")) == []
    (root / VERSION).write_text("0.9.1-\u03b2\n", encoding="utf-8")
    other = run_main(capsys, "hopper", "--verl-root", str(root))
    assert (other.returncode, other.stdout, other.stderr) == (
        2, "", f"patch_verl: error: {root}: verl 0.9.1-\u03b2 found; the hopper edits are for verl 0.9.1 only\n")


@pytest.mark.parametrize(("image", "found"), [("hopper", "0.5.0"), ("p40", "0.9.1")])
def test_another_verl_version_in_process_is_exit_2_naming_both(tmp_path, capsys, image, found):
    root = fake_root(tmp_path)
    (root / VERSION).write_text(found + "\n")
    result = run_main(capsys, image, "--verl-root", str(root))
    want = patch.IMAGES[image].verl
    assert (result.returncode, result.stdout, result.stderr) == (
        2, "", f"patch_verl: error: {root}: verl {found} found; the {image} edits are for verl {want} only\n")


def test_an_unreadable_site_file_is_exit_2_naming_it_and_nothing_is_written(tmp_path, capsys, monkeypatch):
    # as root, a mode of 000 does not stop a read: the file's read fails as a permission error would
    root = fake_root(tmp_path)
    real = Path.read_text

    def read_text(self, *args, **kwargs):
        if self == root / SERVER:
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", read_text)
    result = run_main(capsys, "hopper", "--verl-root", str(root))
    assert (result.returncode, result.stdout, result.stderr) == (
        2, "", f"patch_verl: error: [Errno 13] Permission denied: '{root / SERVER}'\n")
    monkeypatch.undo()
    assert (root / MODEL).read_text() == FAKE_MODEL and (root / SERVER).read_text() == FAKE_SERVER
    assert (root / ENGINE).read_text() == FAKE_ENGINE


def test_a_site_or_version_file_that_is_not_utf8_is_exit_2_naming_it_and_nothing_is_written(tmp_path, capsys):
    # a traceback and exit 1 before: the docstring's promise is exit 2 for a site file that cannot be read
    root = fake_root(tmp_path)
    (root / SERVER).write_bytes(b"x = 1\n\xff\n")
    result = run_main(capsys, "hopper", "--verl-root", str(root))
    assert (result.returncode, result.stdout, result.stderr) == (
        2, "", f"patch_verl: error: {root / SERVER}: not UTF-8 text (invalid start byte at byte 6)\n")
    assert (root / MODEL).read_text() == FAKE_MODEL and (root / ENGINE).read_text() == FAKE_ENGINE
    (root / "version" / "version").write_bytes(b"0.9.1\xfe")
    result = run_main(capsys, "hopper", "--verl-root", str(root))
    assert (result.returncode, result.stderr) == (
        2, f"patch_verl: error: {root / 'version' / 'version'}: not UTF-8 text (invalid start byte at byte 5)\n")


@pytest.mark.parametrize("image", sorted(patch.IMAGES))
def test_skip_of_unknown_names_in_process_is_exit_2_listing_them_and_the_known_ones(tmp_path, capsys, image):
    result = run_main(capsys, image, "--verl-root", str(tmp_path), "--skip", "zz-no-such", "--skip", "no-such-site")
    known = ", ".join(e.name for e in patch.IMAGES[image].edits)
    assert (result.returncode, result.stdout, result.stderr) == (
        2, "", f"patch_verl: error: --skip: unknown edit(s) ['no-such-site', 'zz-no-such']; known: {known}\n")


def test_skip_in_process_leaves_the_edit_unpatched_and_check_says_so(tmp_path, capsys):
    root = fake_root(tmp_path)
    line = {"critic-attn": f"{root / MODEL} critic-attn (verl #5210)",
            "rollout-skip-detokenize": f"{root / SERVER} rollout-skip-detokenize (verl PR #7679)",
            "rows-on-host": f"{root / ENGINE} rows-on-host (per-row non-tensor fields copied to the GPU row by row)"}
    first = run_main(capsys, "hopper", "--verl-root", str(root), "--skip", "critic-attn")
    assert (first.returncode, first.stderr) == (0, "") and first.stdout.splitlines() == [
        f"verl 0.9.1 at {root} (hopper edits)",
        f"UNPATCHED {line['critic-attn']}",
        f"PATCHED {line['rollout-skip-detokenize']}",
        f"PATCHED {line['rows-on-host']}",
        "2 edit(s) patched in 2 file(s); 0 already patched; left unpatched on request: critic-attn",
    ]
    assert (root / MODEL).read_text() == FAKE_MODEL and "# rlrecipes: verl PR #7679" in (root / SERVER).read_text()
    assert "# rlrecipes: rows-on-host" in (root / ENGINE).read_text()

    check = run_main(capsys, "hopper", "--verl-root", str(root), "--check")
    assert check.returncode == 1 and check.stdout.splitlines() == [
        f"verl 0.9.1 at {root} (hopper edits, check only)",
        f"UNPATCHED {line['critic-attn']}",
        f"ALREADY {line['rollout-skip-detokenize']}",
        f"ALREADY {line['rows-on-host']}",
    ]
    assert check.stderr == "1 of 3 edit(s) unpatched; run without --check to patch\n"

    both = run_main(capsys, "hopper", "--verl-root", str(root), "--skip", "critic-attn",
                    "--skip", "rollout-skip-detokenize")
    assert (both.returncode, both.stderr) == (0, "") and both.stdout.splitlines()[1:] == [
        f"UNPATCHED {line['critic-attn']}",
        f"ALREADY {line['rollout-skip-detokenize']}",
        f"ALREADY {line['rows-on-host']}",
        "0 edit(s) patched in 0 file(s); 2 already patched; "
        "left unpatched on request: critic-attn, rollout-skip-detokenize",
    ]
    assert (root / MODEL).read_text() == FAKE_MODEL

    rest = run_main(capsys, "hopper", "--verl-root", str(root))
    assert (rest.returncode, rest.stderr) == (0, "") and rest.stdout.splitlines()[1:] == [
        f"PATCHED {line['critic-attn']}",
        f"ALREADY {line['rollout-skip-detokenize']}",
        f"ALREADY {line['rows-on-host']}",
        "1 edit(s) patched in 1 file(s); 2 already patched",
    ]
    done = run_main(capsys, "hopper", "--verl-root", str(root), "--check")
    assert (done.returncode, done.stderr) == (0, "") and done.stdout.splitlines() == [
        f"verl 0.9.1 at {root} (hopper edits, check only)",
        f"ALREADY {line['critic-attn']}",
        f"ALREADY {line['rollout-skip-detokenize']}",
        f"ALREADY {line['rows-on-host']}",
        "all 3 edits applied",
    ]


def test_skip_of_the_rows_edit_alone_leaves_its_file_as_released(tmp_path, capsys):
    root = fake_root(tmp_path)
    result = run_main(capsys, "hopper", "--verl-root", str(root), "--skip", "rows-on-host")
    assert (result.returncode, result.stderr) == (0, "") and result.stdout.splitlines()[1:] == [
        f"PATCHED {root / MODEL} critic-attn (verl #5210)",
        f"PATCHED {root / SERVER} rollout-skip-detokenize (verl PR #7679)",
        f"UNPATCHED {root / ENGINE} rows-on-host (per-row non-tensor fields copied to the GPU row by row)",
        "2 edit(s) patched in 2 file(s); 0 already patched; left unpatched on request: rows-on-host",
    ]
    assert (root / ENGINE).read_text() == FAKE_ENGINE
    check = run_main(capsys, "hopper", "--verl-root", str(root), "--check")
    assert check.returncode == 1 and states(check) == {
        "critic-attn": "ALREADY", "rollout-skip-detokenize": "ALREADY", "rows-on-host": "UNPATCHED"}

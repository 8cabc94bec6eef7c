"""scripts/patch_verl_hopper.py against the real verl 0.9.1 (.venvs/verl-0.9.1, no flash-attn, no vLLM, CPU).

critic-attn: the released `load_valuehead_model` cannot load a critic without flash-attn even when the
config asks for SDPA (verl #5210); the patched copy loads it with SDPA.
rollout-skip-detokenize (verl PR #7679): the block inserted into the real `vLLMHttpServer.generate`, run on
its own, turns vLLM's detokenization off unless string stop/bad_words need it or the caller chose.
Both edits are idempotent, --check tells patched from unpatched, and a changed function fails with MISMATCH
and writes no file at all, not even the one whose edit would apply."""

from __future__ import annotations

import ast
import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "patch_verl_hopper.py"
MODEL = Path("utils") / "model.py"
SERVER = Path("workers") / "rollout" / "vllm_rollout" / "vllm_async_server.py"
MARKER = ('        if not sampling_params.get("stop") and not sampling_params.get("bad_words"):'
          "  # rlrecipes: verl PR #7679\n")

patch = importlib.import_module("scripts.patch_verl_hopper")
assert Path(patch.__file__).resolve() == SCRIPT.resolve()
EDITS = {edit.name: edit for edit in patch.EDITS}

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


def run_main(capsys, *args: str) -> subprocess.CompletedProcess:
    """The script's main() in this process (what mutation testing sees), as `run` reports a program."""
    code = patch.main(list(args))
    out = capsys.readouterr()
    return subprocess.CompletedProcess([str(SCRIPT), *args], code, out.out, out.err)


def states(result: subprocess.CompletedProcess) -> dict[str, str]:
    """edit name -> the status its line printed (one line per edit, in EDITS order)."""
    lines = result.stdout.splitlines()
    assert len(lines) == len(patch.EDITS), result.stdout + result.stderr
    out = {}
    for edit, line in zip(patch.EDITS, lines):
        status, path, name = line.split()[:3]
        assert name == edit.name and path.endswith(edit.file), line
        out[name] = status
    return out


@pytest.fixture
def verl_copy(tmp_path, verl_python) -> Path:
    python = verl_python("0.9.1")
    out = subprocess.run([str(python), "-c", "import importlib.util as u; print(u.find_spec('verl').submodule_search_locations[0])"],
                         capture_output=True, text=True, timeout=120, check=True)
    root = tmp_path / "verl"
    for rel in (MODEL, SERVER):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(out.stdout.strip()) / rel, root / rel)
    return root


@pytest.mark.verl
def test_patch_makes_the_critic_load_with_sdpa(verl_copy, verl_python):
    model_py = verl_copy / MODEL
    load = [str(verl_python("0.9.1")), "-c", LOAD, str(model_py)]
    before = subprocess.run(load, capture_output=True, text=True, timeout=300)
    assert before.stdout.startswith("FAILED"), before.stdout + before.stderr[-2000:]

    check = run("--verl-root", str(verl_copy), "--check")
    assert check.returncode == 1 and states(check)["critic-attn"] == "UNPATCHED"
    first = run("--verl-root", str(verl_copy))
    assert first.returncode == 0 and set(states(first).values()) == {"PATCHED"}
    second = run("--verl-root", str(verl_copy))
    assert second.returncode == 0 and set(states(second).values()) == {"ALREADY"}
    assert run("--verl-root", str(verl_copy), "--check").returncode == 0

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


@pytest.mark.verl
def test_detokenize_edit_on_the_real_generate(verl_copy):
    server = verl_copy / SERVER
    original = server.read_text()
    gen = generate_of(ast.parse(original))
    assert "detokenize" not in ast.get_source_segment(original, gen)  # released verl 0.9.1: vLLM detokenizes

    check = run("--verl-root", str(verl_copy), "--check")
    assert check.returncode == 1 and states(check)["rollout-skip-detokenize"] == "UNPATCHED"
    first = run("--verl-root", str(verl_copy))
    assert first.returncode == 0 and states(first)["rollout-skip-detokenize"] == "PATCHED"
    patched = server.read_text()
    again = run("--verl-root", str(verl_copy))
    assert again.returncode == 0 and states(again)["rollout-skip-detokenize"] == "ALREADY"
    assert server.read_text() == patched
    assert run("--verl-root", str(verl_copy), "--check").returncode == 0

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


# A stand-in for the two verl files: the real anchors in functions shaped like verl 0.9.1's.
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


def fake_root(tmp_path, model: str = FAKE_MODEL, server: str = FAKE_SERVER) -> Path:
    root = tmp_path / "verl"
    for rel, text in ((MODEL, model), (SERVER, server)):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
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


@pytest.mark.parametrize("broken", ["generate", "critic"])
def test_one_mismatch_writes_neither_file(tmp_path, capsys, broken):
    model, server = FAKE_MODEL, FAKE_SERVER
    if broken == "generate":  # a changed SamplingParams(...) call: the anchor is gone
        server = server.replace(SAMPLING_LINE, SAMPLING_LINE.replace("max_tokens,", "max_tokens, n=1,"))
    else:  # one of the two critic sites is gone
        model = model.replace('            attn_implementation="flash_attention_2",\n', "")
    root = fake_root(tmp_path, model, server)
    result = run_main(capsys, "--verl-root", str(root))
    want = {"critic-attn": "MISMATCH" if broken == "critic" else "UNPATCHED",
            "rollout-skip-detokenize": "MISMATCH" if broken == "generate" else "UNPATCHED"}
    assert result.returncode == 1 and states(result) == want, result.stdout
    assert "nothing written" in result.stderr
    assert (root / MODEL).read_text() == model and (root / SERVER).read_text() == server
    assert sorted(p.name for p in root.rglob(".patch-*")) == []
    assert run_main(capsys, "--verl-root", str(root), "--check").returncode == 1


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


def test_changed_function_is_a_mismatch_and_nothing_is_written(tmp_path, capsys):
    text = ("def load_valuehead_model(local_path, torch_dtype, model_config, trust_remote_code):\n"
            '    return f(attn_implementation="flash_attention_2",\n)\n')
    root = fake_root(tmp_path, model=text)
    result = run_main(capsys, "--verl-root", str(root))
    assert result.returncode == 1 and states(result)["critic-attn"] == "MISMATCH"
    assert (root / MODEL).read_text() == text and (root / SERVER).read_text() == FAKE_SERVER


# In-process runs of main() and apply() (test_the_stand_in_files_patch and the verl-marked tests run the script
# as a program): the status lines' details, the critic edit's ALREADY state and the scope rules.
def test_main_in_process_patches_then_reports_already_with_bare_status_lines(tmp_path, capsys):
    root = fake_root(tmp_path)
    first = run_main(capsys, "--verl-root", str(root))
    assert first.returncode == 0 and first.stdout.splitlines() == [
        f"PATCHED {root / MODEL} critic-attn (verl #5210)",
        f"PATCHED {root / SERVER} rollout-skip-detokenize (verl PR #7679)",
    ] and first.stderr == ""
    patched = {rel: (root / rel).read_text() for rel in (MODEL, SERVER)}
    again = run_main(capsys, "--verl-root", str(root))
    assert again.returncode == 0 and set(states(again).values()) == {"ALREADY"}
    assert run_main(capsys, "--verl-root", str(root), "--check").returncode == 0
    assert {rel: (root / rel).read_text() for rel in (MODEL, SERVER)} == patched


def test_mismatch_details_name_the_counts_and_the_expected_sites(tmp_path, capsys):
    model = FAKE_MODEL.replace('            attn_implementation="flash_attention_2",\n', "")  # one site of two left
    server = FAKE_SERVER.replace("class vLLMHttpServer:", "class SGLangHttpServer:")
    root = fake_root(tmp_path, model, server)
    result = run_main(capsys, "--verl-root", str(root))
    assert result.returncode == 1 and result.stdout.splitlines() == [
        f"MISMATCH {root / MODEL} critic-attn (verl #5210): found anchor 1, replacement 0, marker 0 times in "
        "'def load_valuehead_model(local_path, torch_dtype, model_config, trust_remote_code):' (expected 2 sites)",
        f"MISMATCH {root / SERVER} rollout-skip-detokenize (verl PR #7679): class vLLMHttpServer: "
        "'async def generate(' not found exactly once",
    ]
    assert result.stderr.strip() == "patch_verl_hopper: an anchor did not match; nothing written"
    assert (root / MODEL).read_text() == model and (root / SERVER).read_text() == server


def test_mismatch_detail_of_a_one_site_edit_is_singular():
    server = FAKE_SERVER.replace(SAMPLING_LINE, SAMPLING_LINE * 2)
    new, state, detail = patch.apply(server, EDITS["rollout-skip-detokenize"])
    assert (new, state) == (server, "MISMATCH")
    assert detail == "found anchor 2, replacement 0, marker 0 times in 'async def generate(' (expected 1 site)"


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
                          sites=sites, upstream="verl #1")
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
    check = run_main(capsys, "--verl-root", str(root), "--check")
    assert check.returncode == 1 and set(states(check).values()) == {"UNPATCHED"}
    assert (root / MODEL).read_text() == FAKE_MODEL and (root / SERVER).read_text() == FAKE_SERVER


def test_a_missing_verl_in_process_is_exit_2_naming_the_file(tmp_path, capsys):
    result = run_main(capsys, "--verl-root", str(tmp_path / "nowhere"))
    assert result.returncode == 2 and result.stdout == "" and result.stderr.startswith("patch_verl_hopper: error: ")
    assert str(tmp_path / "nowhere" / MODEL) in result.stderr
    empty = run_main(capsys, "--verl-root", "")  # not the importable verl: an unset variable is an error
    assert (empty.returncode, empty.stdout, empty.stderr) == (2, "", "patch_verl_hopper: error: --verl-root is empty\n")


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
    assert dst == target and src.parent == target.parent and src.name.startswith(".patch-")
    assert sorted(p.name for p in target.parent.iterdir()) == ["f.py"]


def test_help_names_the_options(capsys):
    with pytest.raises(SystemExit) as exit_:
        patch.main(["--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "Anchored edits to verl 0.9.1 for the Hopper image" in text
    assert "change nothing; exit 1 unless every edit is applied" in text
    assert "the verl package directory (default: the importable verl)" in text

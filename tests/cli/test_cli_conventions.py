"""CLI conventions: shell completion (shtab), global -v/-q/--log-level, --json where a script wants it, a
closed output pipe without a traceback, and `env` reporting what a bug report needs."""

from __future__ import annotations

import fcntl
import functools
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from rlrecipes import ui
from rlrecipes.cli import main
from rlrecipes.errors import EXIT_INVALID, EXIT_PIPE_CLOSED

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _restore_logging():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    ui.VERBOSITY, ui.LOG_LEVEL = 0, None


def _cli(*args: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlrecipes", *args], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, cwd=REPO, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})


# ------------------------------------------------------------------------------------ completion
@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize(("words", "expect"), [
    (["rlrecipes", "pl"], ["plan"]),
    (["rlrecipes", "plan", "--js"], ["--json"]),
    (["rlrecipes", "--log-level", ""], ["debug", "info", "warning", "error"]),
    (["rlrecipes", "completion", ""], ["bash", "tcsh", "zsh"]),
    (["rlrecipes", "watchdog", "--keep-l"], ["--keep-last"]),
])
def test_bash_completion_completes_commands_and_their_options(tmp_path, words, expect):
    proc = _cli("completion", "bash")
    assert proc.returncode == 0, proc.stderr
    script = tmp_path / "rlrecipes.bash"
    script.write_text(proc.stdout)
    quoted = " ".join(f"'{w}'" for w in words)
    probe = (f"source {script}; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; "
             f"COMP_LINE='{' '.join(words)}'; COMP_POINT=${{#COMP_LINE}}; "
             f"_shtab_rlrecipes rlrecipes '{words[-1]}' '{words[-2]}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
    assert sorted(out.stdout.split()) == sorted(expect), out.stderr


def test_zsh_completion_names_every_command():
    proc = _cli("completion", "zsh")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("#compdef rlrecipes")
    for command in ("validate", "plan", "preflight", "watchdog", "completion"):
        assert f"\n    {command}:'" in proc.stdout


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ ;\[(]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _not_in_host_env() -> set[str]:
    """Top-level modules of rlrecipes' dependencies (and the image-only torch stack) that the light host
    environment (requirements/host.txt and what those packages pull in) does not have."""
    from importlib import metadata

    host = [_name(ln) for ln in (REPO / "requirements" / "host.txt").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]
    have, todo = set(), list(host)
    while todo:
        dist = todo.pop()
        if dist in have:
            continue
        have.add(dist)
        try:
            todo += [_name(r) for r in metadata.requires(dist) or [] if "extra ==" not in r]
        except metadata.PackageNotFoundError:
            pass
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    missing = {_name(d) for d in deps} - have | {"torch", "transformers", "verl", "datasets", "vllm"}
    tops: dict[str, set[str]] = {}
    for top, dists in metadata.packages_distributions().items():
        for dist in dists:
            tops.setdefault(_name(dist), set()).add(top)
    return {top for dist in missing for top in tops.get(dist, {dist.replace("-", "_")})}


def _cli_in_host_env(*args: str) -> subprocess.CompletedProcess:
    """The CLI as .venvs/host runs it: importing a module the host environment lacks fails."""
    blocked = sorted(_not_in_host_env())
    code = ("import sys\n"
            f"BLOCKED = {blocked!r}\n"
            "class HostEnv:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.partition('.')[0] in BLOCKED:\n"
            "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
            "sys.meta_path.insert(0, HostEnv())\n"
            "from rlrecipes.cli import main\n"
            "raise SystemExit(main(sys.argv[1:]))\n")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def test_the_host_env_lacks_what_host_txt_leaves_out():
    blocked = _not_in_host_env()
    assert {"torch", "pyarrow", "numpy"} <= blocked and not {"yaml", "rich", "hydra", "omegaconf"} & blocked


@pytest.mark.parametrize("shell", ["bash", "zsh", "tcsh"])
def test_completion_works_from_the_host_env(shell):
    """The README's CLI is .venvs/host (requirements/host.txt): completion failed there with "needs shtab"."""
    proc = _cli_in_host_env("completion", shell)
    assert proc.returncode == 0, proc.stderr
    assert "rlrecipes" in proc.stdout and "watchdog" in proc.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("works", [True, False])
def test_the_readmes_completion_install_writes_a_script_or_nothing(tmp_path, works):
    """The README's `rlrecipes completion bash > FILE` left an empty FILE when the command failed."""
    block = re.search(r"```bash\n(.*?)```", (REPO / "README.md").read_text().split("Shell completion")[1], re.S)
    line = next(ln for ln in block.group(1).splitlines() if "completion bash" in ln)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "rlrecipes"
    fake.write_text(f"#!/bin/sh\nexec {sys.executable} -m rlrecipes \"$@\"\n" if works else
                    "#!/bin/sh\necho 'error: completion needs shtab' >&2\nexit 3\n")
    fake.chmod(0o755)
    env = {**os.environ, "HOME": str(tmp_path), "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(REPO)}
    target = tmp_path / ".local" / "share" / "bash-completion" / "completions" / "rlrecipes"
    if not works:
        target.parent.mkdir(parents=True)  # where a plain `> FILE` would leave an empty file
    proc = subprocess.run(["bash", "-c", line], capture_output=True, text=True, env=env, timeout=120)
    if works:
        assert proc.returncode == 0, proc.stderr
        assert "_shtab_rlrecipes" in target.read_text()
    else:
        assert proc.returncode != 0
        assert not target.exists(), "a failed completion command left a file behind"


# ------------------------------------------------------------------------------- -v / -q / level
@pytest.mark.parametrize(("flags", "level", "verbosity"), [
    (["-v"], logging.INFO, 1), (["-vv"], logging.DEBUG, 2), (["-q"], logging.ERROR, -1),
    (["--log-level", "debug"], logging.DEBUG, 0), (["--log-level=error"], logging.ERROR, 0),
])
def test_global_options_set_the_log_level(capsys, flags, level, verbosity):
    assert main([*flags, "recipes"]) == 0
    assert logging.getLogger().level == level and ui.VERBOSITY == verbosity
    capsys.readouterr()
    logging.getLogger("rlrecipes.test").log(level, "a message at the chosen level")
    logging.getLogger("rlrecipes.test").log(level - 5, "one below it")
    err = capsys.readouterr().err
    assert "a message at the chosen level" in err and "one below it" not in err


def test_quiet_hides_progress_lines(capsys):
    assert main(["-q", "recipes"]) == 0
    capsys.readouterr()
    with ui.stage("merging"):
        pass
    with ui.progress_bar("scoring", 3) as advance:
        advance(3)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(("argv", "message"), [
    (["-v", "-q", "recipes"], "not allowed with argument"),
    (["--log-level", "loud", "recipes"], "invalid choice: 'loud'"),
    (["--json", "recipes"], "unknown option '--json' before the command"),
])
def test_bad_global_options_are_usage_errors(capsys, argv, message):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == EXIT_INVALID
    assert message in capsys.readouterr().err


def test_help_shows_the_conventions():
    proc = _cli("--help")
    assert proc.returncode == 0
    for text in ("-v, --verbose", "-q, --quiet", "--log-level", "completion", "70 internal error"):
        assert text in proc.stdout, text


# ------------------------------------------------------------------------------------ --json
def test_recipes_json_lists_every_recipe_and_profile(capsys):
    from rlrecipes.recipe.load import list_profiles, list_recipes

    assert main(["recipes", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in data["recipes"]] == list_recipes()
    assert [p["name"] for p in data["profiles"]] == list_profiles()
    grpo = next(r for r in data["recipes"] if r["name"] == "qwen2.5-3b-gsm8k-grpo-lora")
    assert grpo["path"] == "recipes/qwen2.5-3b-gsm8k-grpo-lora.yaml" and "a100-80gb" in grpo["profiles"]
    p40 = next(p for p in data["profiles"] if p["name"] == "p40-24gb")
    assert (p40["image"], p40["verl"], p40["gpus"]) == ("p40", "0.5.0", 1)


# ------------------------------------------------------------------------------- closed pipe
def test_a_closed_output_pipe_ends_quietly():
    # `rlrecipes plan --json | head`: the reader is gone before the first write (read end closed)
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = _cli("plan", "qwen2.5-3b-gsm8k-grpo-lora", "--json", stdout=write_end)
    finally:
        os.close(write_end)
    assert proc.stderr == ""  # no BrokenPipeError traceback, no "Exception ignored" at exit
    assert proc.returncode == EXIT_PIPE_CLOSED


TABLES = [["plan", "canary-grpo-lora", "--memory"], ["recipes"],
          ["preflight", "canary-grpo-lora", "--gpu-inventory", str(REPO / "tests" / "fixtures" / "inventories" /
                                                                     "a100-80gb-x4.json")]]


@pytest.mark.parametrize("args", TABLES, ids=lambda a: a[0])
def test_a_table_into_a_closed_pipe_ends_with_sigpipes_status(args):
    """rich's own closed-pipe handler exits 1; the README promises 141, as for --json."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = _cli(*args, stdout=write_end)
    finally:
        os.close(write_end)
    assert proc.stderr == ""
    assert proc.returncode == EXIT_PIPE_CLOSED


@pytest.mark.parametrize("args", [TABLES[0], TABLES[2]], ids=lambda a: a[0])
def test_head_of_a_table_ends_with_sigpipes_status(args):
    """`rlrecipes plan X | head -1`: the reader takes the start, then leaves. The pipe holds 4 KiB, less than
    the output, so the writer is still writing when the reader leaves (no race)."""
    whole = _cli(*args).stdout.encode()
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    assert len(whole) > fcntl.fcntl(write_end, fcntl.F_GETPIPE_SZ) + 64
    proc = subprocess.Popen([sys.executable, "-m", "rlrecipes", *args], stdout=write_end, stderr=subprocess.PIPE,
                            text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    os.close(write_end)
    first = os.read(read_end, 64)
    os.close(read_end)
    _, err = proc.communicate(timeout=120)
    assert first and whole.startswith(first)
    assert err == "" and proc.returncode == EXIT_PIPE_CLOSED


def test_head_reads_the_start_of_the_plan():
    proc = subprocess.run(f"set -o pipefail; {sys.executable} -m rlrecipes plan qwen2.5-3b-gsm8k-grpo-lora --json "
                          "| head -c 1", shell=True, executable="bash", capture_output=True, text=True, cwd=REPO,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout == "{"
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr
    assert proc.returncode in (0, EXIT_PIPE_CLOSED)  # 0 when the whole plan fit in the pipe first


# ------------------------------------------------------------------------------------ tables at 80 columns
INVENTORY = "tests/fixtures/inventories/a100-80gb-x4.json"  # as typed in the checkout (a path is one word)
NARROW_TABLES = [["recipes"], ["plan", "canary-grpo-lora", "--memory"], ["plan", "canary-ppo", "--memory"],
                 ["plan", "smoke-ppo", "--memory"], ["plan", "qwen2.5-0.5b-gsm8k-ppo", "--memory"],
                 ["plan", "qwen2.5-3b-gsm8k-grpo-lora", "--memory"],
                 ["plan", "qwen2.5-3b-gsm8k-grpo-lora", "--profile", "h200-141gb", "--memory"],
                 ["preflight", "canary-grpo-lora", "--gpu-inventory", INVENTORY, "--memory"],
                 ["preflight", "qwen2.5-3b-gsm8k-grpo-lora", "--gpu-inventory", INVENTORY, "--memory"]]
BOX_DRAWING = "".join(chr(c) for c in range(0x2500, 0x2580))


def _words(text: str) -> set[str]:
    return set(re.split(rf"[\s{BOX_DRAWING}]+", text)) - {""}


def _table_output(capsys, monkeypatch, columns: int, args: list[str]) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    main(args)
    out = capsys.readouterr().out
    # the plan's launch command is printed to be copied into a shell: its words are never broken, so not wrapped
    return out.split("\ncommand:\n")[0]


@pytest.mark.parametrize("args", NARROW_TABLES, ids=lambda a: " ".join(a[:2] + a[3:4]))
def test_tables_are_readable_at_80_columns(capsys, monkeypatch, args):
    """recipes, plan and preflight forced 100-190 columns (or folded words mid-word at 80)."""
    from rich.cells import cell_len

    from rlrecipes.preflight import host

    monkeypatch.chdir(REPO)
    facts = functools.lru_cache(host.gather_host_facts)  # the same disk/RAM figures in both renderings
    monkeypatch.setattr(host, "gather_host_facts", lambda paths, **kw: facts(tuple(paths), **kw))
    narrow = _table_output(capsys, monkeypatch, 80, args)
    wide = _table_output(capsys, monkeypatch, 400, args)
    too_long = [line for line in narrow.splitlines() if cell_len(line) > 80]
    assert too_long == []
    # every word at 80 columns is a whole word of the unwrapped rendering: none folded, none cut with an ellipsis
    assert _words(narrow) - _words(wide) == set(), narrow
    assert max(cell_len(line) for line in wide.splitlines()) > 80  # the content did need wrapping


# ------------------------------------------------------------------------------------- env
def test_env_json_keys_are_identifiers(capsys):
    assert main(["env", "--json", "--gpu-inventory", str(REPO / "tests" / "fixtures" / "inventories" /
                                                            "a100-80gb-x4.json")]) == 0
    info = json.loads(capsys.readouterr().out)
    assert not [key for key in info if not key.isidentifier()]
    assert {"git_commit", "driver_max_cuda", "torch_cuda_build", "image_cuda", "gpu_source"} <= set(info)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_untracked_files_do_not_make_a_checkout_dirty(tmp_path, monkeypatch):
    from rlrecipes.ui import git_commit

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)

    git("init", "-q")
    (tmp_path / "recipe.yaml").write_text("a: 1\n")
    git("add", "recipe.yaml")
    git("commit", "-qm", "x")
    monkeypatch.setenv("RLRECIPES_HOME", str(tmp_path))
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "notes.txt").write_text("untracked")
    commit = git_commit()
    assert commit is not None and len(commit) == 40 and not commit.endswith("-dirty")
    (tmp_path / "recipe.yaml").write_text("a: 2\n")
    assert git_commit() == commit + "-dirty"


# ------------------------------------------------------------------------------------ one command, one module
def test_every_command_is_one_module_in_cli_named_after_it():
    from rlrecipes.cli import COMMANDS

    for name, (module, func, _, _) in COMMANDS.items():
        assert module == f"rlrecipes.cli.{name.replace('-', '_')}", (name, module)
        assert (REPO / "rlrecipes" / "cli" / f"{name.replace('-', '_')}.py").is_file(), name
    modules = {p.stem for p in (REPO / "rlrecipes" / "cli").glob("*.py")} - {"__init__", "arguments"}
    assert modules == {n.replace("-", "_") for n in COMMANDS}, "a module in cli/ that is no command, or the reverse"


def test_only_cli_modules_define_arguments_and_recipe_commands_share_them():
    import ast

    stage_parsers, own_recipe_args = [], []
    for path in (REPO / "rlrecipes").rglob("*.py"):
        rel = path.relative_to(REPO / "rlrecipes").as_posix()
        text = path.read_text()
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name.endswith("_arguments") and not rel.startswith("cli/"):
                stage_parsers.append(f"{rel}:{node.name}")
            if (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument" and node.args
                    and isinstance(node.args[0], ast.Constant) and node.args[0].value in ("recipe", "overrides")):
                own_recipe_args.append(f"{rel}:{node.args[0].value}")
    assert not stage_parsers, f"command options outside rlrecipes/cli/: {stage_parsers}"
    # model takes a recipe name only (no profile or overrides apply to a download); smoke runs its own smoke
    # recipes (--recipe, repeatable) with extra overrides for every launch
    assert sorted(own_recipe_args) == ["cli/arguments.py:overrides", "cli/arguments.py:recipe", "cli/model.py:recipe",
                                       "cli/smoke.py:overrides"], own_recipe_args

"""The package shows the pipeline: the README's map names every stage package and shared module that exists
(and nothing that does not), few modules stay at the top, and the lower layers (shared modules, verl/,
recipe/, plan/) import nothing from the stages that come after them. The README's counts and lists of what the
code has (preflight checks, the commands that take --json) are read from the code, not typed."""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "rlrecipes"
# lowest first: a module may import from its own layer or below, never from a later one
LOWER = ("errors", "fsutil", "process", "paths", "ui", "reference", "verl", "recipe", "plan")
LATER = ("data", "rewards", "preflight", "smoke", "launch", "watchdog", "after", "report", "cli")


def readme_map() -> str:
    text = (REPO / "README.md").read_text()
    start = text.index("The Python package reads in the same order")
    block = re.search(r"```\n(rlrecipes/\n.*?)```", text[start:], re.S)
    assert block, "the README's package map is not where it was"
    return block.group(1)


def test_readme_map_names_every_package_and_top_module():
    shown = readme_map()
    packages = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    modules = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    for name in packages:
        assert re.search(rf"^  {name}/", shown, re.M), f"rlrecipes/{name}/ is missing from the README's map"
    for name in modules:
        assert re.search(rf"(^|\s){re.escape(name)}(\s|$)", shown, re.M), f"rlrecipes/{name} is not in the map"


def test_readme_map_names_nothing_that_does_not_exist():
    shown = readme_map()
    for folder in re.findall(r"^  (\w+)/", shown, re.M):
        assert (PACKAGE / folder / "__init__.py").is_file(), f"the map shows rlrecipes/{folder}/, which is gone"
    current = None
    for line in shown.splitlines()[1:]:
        top = re.match(r"^  (\w+)/", line)
        if top:
            current = PACKAGE / top.group(1)
        elif re.match(r"^  \S", line):
            current = PACKAGE
        for name in re.findall(r"(?<![\w/.{])(\w+\.py)\b", line):
            where = [current] if current else [PACKAGE]
            where += [p.parent for p in PACKAGE.rglob(name)]
            assert any((folder / name).is_file() for folder in where if folder), f"the map names {name}: no such file"


def readme_text() -> str:
    return " ".join((REPO / "README.md").read_text().split())


def test_readme_counts_every_preflight_check():
    from rlrecipes.preflight.checks import CHECK_NAMES

    counts = re.findall(r"with the fix for (\d+) checks", readme_text())
    assert counts == [str(len(CHECK_NAMES))], f"the registry has {len(CHECK_NAMES)} checks; the README says {counts}"


def test_readme_lists_every_command_that_takes_json():
    from rlrecipes.cli import build_parser

    sub = next(a for a in build_parser(full=True)._actions if isinstance(a, argparse._SubParsersAction))
    takes_json = {name for name, parser in sub.choices.items() if "--json" in parser._option_string_actions}
    listed = re.search(r"`--json` on (.*?) prints machine-readable output", readme_text())
    assert listed, "the README's --json sentence is not where it was"
    assert set(re.findall(r"`([a-z-]+)`", listed.group(1))) == takes_json


def test_no_module_over_500_lines():
    long = {str(p.relative_to(REPO)): n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines())) > 500}
    assert not long, long


def test_at_most_eight_modules_at_the_top():
    top = [p.name for p in PACKAGE.glob("*.py")]
    assert len(top) <= 8, top


def imports_of(path: Path) -> set[str]:
    """The rlrecipes modules a file imports (module-level or inside functions), as dotted names."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rlrecipes"):
            if node.module == "rlrecipes":
                found.update(f"rlrecipes.{alias.name}" for alias in node.names)
            else:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("rlrecipes"))
    return found


def test_lower_layers_import_no_later_stage():
    wrong = []
    for layer in LOWER:
        files = [PACKAGE / f"{layer}.py"] if (PACKAGE / f"{layer}.py").is_file() else (PACKAGE / layer).rglob("*.py")
        for path in files:
            for module in imports_of(path):
                stage = module.split(".")[1] if "." in module else ""
                if stage in LATER:
                    wrong.append(f"{path.relative_to(REPO)} imports {module}")
    assert not wrong, wrong


# The stages in the order a run goes through them (the README's map); the shared modules and verl/ come first.
# smoke/ drives a whole run (train, kill, resume, merge) but imports only what comes before it.
ORDER = ("errors", "fsutil", "process", "paths", "ui", "reference", "verl", "recipe", "plan", "data", "rewards", "preflight",
         "launch", "smoke", "watchdog", "after", "report", "cli")


def upward_imports(order=ORDER) -> list[str]:
    rank = {name: i for i, name in enumerate(order)}
    wrong = []
    for path in PACKAGE.rglob("*.py"):
        own = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        if own not in rank:
            continue
        for module in imports_of(path):
            parts = module.split(".")
            if len(parts) > 1 and rank.get(parts[1], -1) > rank[own]:
                wrong.append(f"{path.relative_to(REPO)} imports {module}")
    return sorted(wrong)


def test_no_stage_imports_a_later_one():
    """Every package imports only itself, the shared modules and the stages before it (cli/ is last)."""
    top = {p.name.removesuffix(".py") for p in PACKAGE.iterdir()
           if (p.is_dir() and (p / "__init__.py").is_file()) or (p.suffix == ".py" and p.stem not in ("__init__", "__main__"))}
    assert top == set(ORDER), top ^ set(ORDER)
    assert upward_imports() == []
    # not vacuous: with verl/ moved to just before cli/, after/'s reading of checkpoints is an upward import
    moved = tuple(n for n in ORDER if n not in ("verl", "cli")) + ("verl", "cli")
    assert any(w.startswith("rlrecipes/after/") and w.endswith(".checkpoints") for w in upward_imports(moved))


def test_the_layer_check_sees_an_upward_import(tmp_path):
    """The rule above is not vacuous: an import of a later stage, at module level or inside a function, is seen."""
    probe = tmp_path / "probe.py"
    probe.write_text("from rlrecipes import ui\ndef f():\n    from rlrecipes.after.expect import judge\n"
                     "import rlrecipes.verl.run_metrics as m\n")
    assert imports_of(probe) == {"rlrecipes.ui", "rlrecipes.after.expect", "rlrecipes.verl.run_metrics"}


def test_tests_mirror_the_package():
    tests = REPO / "tests"
    assert not sorted(p.name for p in tests.glob("test_*.py")), "a test file at the top of tests/: put it in its stage's folder"
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    # verl_layer: a folder named verl on pytest's path would be found by `import verl` / find_spec("verl")
    expected = (packages - {"verl"}) | {"verl_layer", "repo"}
    folders = {p.name for p in tests.iterdir() if p.is_dir() and p.name not in ("fixtures", "support", "__pycache__")}
    assert folders <= expected, folders - expected
    missing = {name for name in expected if not any((tests / name).glob("test_*.py"))}
    assert not missing, f"no tests for {missing}"


# A script that hands over to another by path (`bash benchmarks/gpu/x.sh`, `"$(dirname "$0")/x.sh"`, `python3
# .../x.py`) fails only when it runs, on the GPU host: flagship_3b_variant.sh exec'd a follow script
# after it was renamed.
_SCRIPT_REF = re.compile(r"""(?:benchmarks/gpu/|\$\(dirname "\$0"\)/)([\w.-]+\.(?:sh|py))""")


def _script_refs(text: str) -> set[str]:
    return set(_SCRIPT_REF.findall(text))


def test_every_benchmark_script_named_by_another_exists():
    folder = REPO / "benchmarks" / "gpu"
    missing = [f"{script.name} -> {name}" for script in sorted(folder.glob("*.*")) if script.suffix in (".sh", ".py")
               for name in sorted(_script_refs(script.read_text())) if not (folder / name).is_file()]
    assert not missing, f"scripts named but not in benchmarks/gpu/: {missing}"


def test_the_script_reference_check_sees_a_renamed_script():
    refs = _script_refs('exec bash "$(dirname "$0")/hopper-wait.sh" "$LIMIT"\nbash benchmarks/gpu/job_follow.sh 540')
    assert refs == {"hopper-wait.sh", "job_follow.sh"}

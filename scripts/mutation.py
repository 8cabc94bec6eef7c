#!/usr/bin/env python3
"""`make mutation`: mutmut over the core-rule modules, one time-bounded run per module.

For each module a scratch copy of the checkout is made (under .cache/mutation/<name>/, or --work) whose
pyproject.toml narrows mutmut to that one file and the test files that cover it; `mutmut run` then
mutates it, runs the covering tests against every mutant (mutmut picks, per mutated function, only the
tests that executed it) and is stopped after --minutes. The score per module is killed / (killed +
survived), timeouts counting as killed, as mutmut reports it; survivors are listed by name so that
`mutmut show NAME` (run in the module's scratch folder) prints the diff. Results: one JSON per module
beside the scratch copy and a summary table on stdout (docs/benchmarks.md records the figures).

    python scripts/mutation.py                  # every module, 8 minutes each at most
    python scripts/mutation.py scorer memory --minutes 5
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# name -> (file to mutate, test files that cover it, pytest options)
MODULES: dict[str, tuple[str, list[str], list[str]]] = {
    # the two deselected tests check that the scorer file imports nothing but the standard library,
    # which mutmut's instrumented copy does not (it imports mutmut)
    "scorer": ("rlrecipes/rewards/gsm8k.py", ["tests/rewards/test_rewards.py", "tests/rewards/test_rewards_agreement.py"],
               ["-m", "not verl", "--deselect", "tests/rewards/test_rewards.py::test_loads_standalone_by_path_with_stdlib_only",
                "--deselect", "tests/rewards/test_rewards.py::test_module_source_has_no_package_imports"]),
    "watchdog-policy": ("rlrecipes/watchdog/policy.py", ["tests/watchdog/test_watchdog_policy.py"], []),
    "checkpoint-resume": ("rlrecipes/verl/resume.py",
                          ["tests/verl_layer/test_verl_resume.py", "tests/watchdog/test_watchdog_policy.py",
                           "tests/watchdog/test_watchdog_safety.py", "tests/verl_layer/test_checkpoint_layout.py"], []),
    "checkpoint-layout": ("rlrecipes/verl/checkpoints.py",
                          ["tests/verl_layer/test_checkpoint_layout.py", "tests/watchdog/test_watchdog_policy.py",
                           "tests/watchdog/test_watchdog_safety.py", "tests/after/test_merge.py"],
                          ["-m", "not verl and not docker"]),
    "recipe-schema": ("rlrecipes/recipe/load.py", ["tests/recipe/test_recipe_load_rules.py"], ["-m", "not verl"]),
    "overrides": ("rlrecipes/recipe/overrides.py", ["tests/recipe/test_overrides_rules.py", "tests/recipe/test_recipe_load_rules.py",
                                                    "tests/recipe/test_recipe.py", "tests/recipe/test_schema_strict.py"],
                  ["-m", "not verl"]),
    "memory": ("rlrecipes/plan/memory.py", ["tests/plan/test_memory.py"], []),
    "patch": ("scripts/patch_verl.py", ["tests/repo/test_patch_verl.py"], ["-m", "not verl"]),
    "report-metrics": ("rlrecipes/verl/run_metrics.py", ["tests/report/test_report.py"], []),
}
COPY = ["rlrecipes", "scripts", "recipes", "tests", "docker", "pyproject.toml", "README.md"]


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def prepare(name: str, work: Path) -> Path:
    target, tests, options = MODULES[name]
    root = work / name
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    for item in COPY:
        src = REPO / item
        if src.is_dir():
            shutil.copytree(src, root / item, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif src.exists():
            shutil.copy2(src, root / item)
    text = (root / "pyproject.toml").read_text()
    text = re.sub(r"(?ms)^\[tool\.mutmut\].*?(?=^\[|\Z)", "", text)
    source_dir = str(Path(target).parent) if target.startswith("scripts/") else target.split("/", 1)[0]
    text += (
        "\n[tool.mutmut]\n"
        f"source_paths = {_toml_list([source_dir])}\n"
        f"only_mutate = {_toml_list([target])}\n"
        f"also_copy = {_toml_list([c for c in COPY if c not in (source_dir, 'tests', 'pyproject.toml')])}\n"
        f"pytest_add_cli_args_test_selection = {_toml_list(tests)}\n"
        f"pytest_add_cli_args = {_toml_list(['-p', 'no:cacheprovider', '-q', *options])}\n"
    )
    (root / "pyproject.toml").write_text(text)
    return root


def run(name: str, work: Path, minutes: float) -> dict:
    root = prepare(name, work)
    mutmut = Path(sys.executable).with_name("mutmut")
    env = dict(os.environ, PYTHONPATH="", RLRECIPES_HOME="")
    env.pop("RLRECIPES_HOME")
    start = time.monotonic()
    proc = subprocess.Popen([str(mutmut), "run"], cwd=root, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=minutes * 60)
        finished = True
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        finished = False
    elapsed = time.monotonic() - start
    results = subprocess.run([str(mutmut), "results", "--all", "true"], cwd=root, env=env, capture_output=True,
                             text=True, timeout=300)
    status: dict[str, str] = {}
    for line in results.stdout.splitlines():
        m = re.match(r"\s*(\S+): (\w[\w ]*)$", line)
        if m:
            status[m.group(1)] = m.group(2).strip()
    counts: dict[str, int] = {}
    for verdict in status.values():
        counts[verdict] = counts.get(verdict, 0) + 1
    killed = counts.get("killed", 0) + counts.get("timeout", 0)
    survived = counts.get("survived", 0)
    summary = {
        "module": name, "file": MODULES[name][0], "tests": MODULES[name][1], "finished": finished,
        "seconds": round(elapsed), "counts": counts, "killed": killed, "survived": survived,
        "score": None if killed + survived == 0 else round(100 * killed / (killed + survived), 1),
        "survivors": sorted(k for k, v in status.items() if v == "survived"),
        "log_tail": "\n".join(line.rsplit("\r", 1)[-1] for line in (out or "").splitlines()[-5:]),
    }
    (work / f"{name}.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", metavar="MODULE",
                        help=f"modules to mutate (default: all of {', '.join(MODULES)})")
    parser.add_argument("--minutes", type=float, default=8.0, help="time limit per module (default 8)")
    parser.add_argument("--work", type=Path, default=REPO / ".cache" / "mutation", help="scratch folder")
    args = parser.parse_args(argv)
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        parser.error(f"unknown module(s) {', '.join(unknown)}; choose from {', '.join(MODULES)}")
    if shutil.which("mutmut", path=str(Path(sys.executable).parent)) is None:
        print("error: mutmut is not installed next to this interpreter (pip install -e .[dev])", file=sys.stderr)
        return 2
    args.work.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.modules or list(MODULES):
        summary = run(name, args.work, args.minutes)
        rows.append(summary)
        print(f"{name:<18} {summary['file']:<32} killed {summary['killed']:>4}  survived {summary['survived']:>4}  "
              f"score {summary['score']}%  {'done' if summary['finished'] else 'TIME LIMIT'} {summary['seconds']} s",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

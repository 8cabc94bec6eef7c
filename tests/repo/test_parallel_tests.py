"""`make test` spreads the suite over pytest-xdist workers (`--dist loadgroup`, tests/conftest.py). A module
whose fixtures outlive one test (scope module or session: a Ray cluster, a Slurm cluster, a browser page, a
verl environment's dry run) must keep its tests on one worker, or each worker builds the fixture again; a
test of the private Docker daemon joins the one "docker" group through the fixture it uses."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
DOCKER_FIXTURES = {"docker_env", "p40_standin", "watchdog_image"}  # tests/support/docker.py


def shared_fixtures(tree: ast.Module) -> list[ast.FunctionDef]:
    """Fixtures declared with scope module, package or session."""
    found = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for dec in node.decorator_list:
            if isinstance(dec, ast.Call) and ast.unparse(dec.func) == "pytest.fixture":
                scope = {k.arg: k.value for k in dec.keywords}.get("scope")
                if isinstance(scope, ast.Constant) and scope.value in ("module", "package", "session"):
                    found.append(node)
    return found


def grouped(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            return "xdist_group" in ast.unparse(node.value)
    return False


def test_every_module_with_shared_fixtures_runs_on_one_worker():
    loose = []
    for path in sorted(TESTS.rglob("test_*.py")):
        tree = ast.parse(path.read_text())
        for fixture in shared_fixtures(tree):
            args = {a.arg for a in fixture.args.args}
            if not grouped(tree) and not args & DOCKER_FIXTURES:
                loose.append(f"{path.relative_to(REPO)}::{fixture.name}")
    assert not loose, ("these module/session fixtures would be built once per xdist worker; give their module "
                       f"`pytestmark = pytest.mark.xdist_group(...)`: {loose}")


def test_the_check_sees_a_loose_module_fixture():
    tree = ast.parse('import pytest\n\n@pytest.fixture(scope="module")\ndef cluster():\n    yield 1\n')
    assert [f.name for f in shared_fixtures(tree)] == ["cluster"] and not grouped(tree)
    tree = ast.parse('import pytest\npytestmark = [pytest.mark.slow, pytest.mark.xdist_group("x")]\n')
    assert grouped(tree)


def test_make_test_runs_on_workers_with_groups():
    dry = subprocess.run(["make", "-n", "test", "PYTEST_WORKERS=3"], capture_output=True, text=True, cwd=REPO,
                         check=True).stdout
    line = next(ln for ln in dry.splitlines() if "-m pytest" in ln)
    assert re.search(r"-m pytest -n 3 --dist loadgroup\b", line), line

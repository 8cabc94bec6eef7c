"""`make test` spreads the suite over pytest-xdist workers (`--dist loadgroup`, tests/conftest.py). A module
whose fixtures outlive one test (scope module or session: a Ray cluster, a Slurm cluster, a browser page, a
verl environment's dry run) must keep its tests on one worker, or each worker builds the fixture again; a
test of the private Docker daemon joins the one "docker" group through the fixture it uses."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

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


SUITE = {
    # the repository's own grouping hook, loaded from tests/conftest.py, and a stand-in for the Docker fixture
    "conftest.py": f"""
        import importlib.util, json, os, pytest
        spec = importlib.util.spec_from_file_location("repo_conftest", {str(TESTS / "conftest.py")!r})
        repo = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(repo)
        pytest_collection_modifyitems = repo.pytest_collection_modifyitems

        @pytest.fixture
        def docker_env():
            return None

        @pytest.fixture
        def image(docker_env):  # as p40_standin: a test reaches the daemon through another fixture
            return None

        @pytest.fixture(autouse=True)
        def record(request):
            yield
            with open({{out!r}}, "a") as f:
                f.write(json.dumps([request.node.nodeid, os.environ["PYTEST_XDIST_WORKER"]]) + "\\n")
    """,
    "test_docker.py": """
        import pytest
        @pytest.mark.parametrize("i", range(6))
        def test_build(image, i):
            pass
    """,
    "test_module_group.py": """
        import pytest
        pytestmark = pytest.mark.xdist_group("cluster")
        @pytest.mark.parametrize("i", range(6))
        def test_on_the_cluster(i):
            pass
    """,
    "test_free.py": """
        import pytest
        @pytest.mark.parametrize("i", range(12))
        def test_anywhere(i):
            pass
    """,
}


@pytest.mark.slow
def test_groups_hold_under_the_installed_pytest_and_xdist(tmp_path):
    """The suite `make test` runs, in small: the Docker-fixture tests and a module's marked tests each stay on one
    worker, with xdist's group suffix on their ids. pytest 9.2 turned this into a silent no-op (pyproject.toml)."""
    out = tmp_path / "ran.jsonl"
    suite = tmp_path / "suite"
    suite.mkdir()
    for name, text in SUITE.items():
        (suite / name).write_text(textwrap.dedent(text).replace("{out!r}", repr(str(out))))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "RLRECIPES_"))}
    env["PYTHONPATH"] = str(TESTS)  # tests/conftest.py imports support.require
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2", "--dist",
                           "loadgroup", str(suite)], capture_output=True, text=True, cwd=suite, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ran = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(ran) == 24
    by_file: dict[str, list[tuple[str, str]]] = {}
    for nodeid, worker in ran:
        by_file.setdefault(nodeid.split("::")[0], []).append((nodeid, worker))
    for name, group in (("test_docker.py", "docker"), ("test_module_group.py", "cluster")):
        assert all(nodeid.endswith(f"@{group}") for nodeid, _ in by_file[name]), by_file[name]
        assert len({worker for _, worker in by_file[name]}) == 1, by_file[name]
    assert not any("@" in nodeid for nodeid, _ in by_file["test_free.py"])
    assert len({worker for _, worker in ran}) == 2  # both workers ran something: the run was parallel


def test_workers_follow_the_cores_up_to_four(tmp_path):
    """One worker per core, at most 4 (a worker and the verl processes it starts hold over a GB); 2 where nproc
    fails."""
    fake = tmp_path / "nproc"
    for cores, workers in (("64", "4"), ("3", "3"), ("1", "1"), (None, "2")):
        fake.write_text(f"#!/bin/sh\necho {cores}\n" if cores else "#!/bin/sh\nexit 1\n")
        fake.chmod(0o755)
        env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}")
        env.pop("PYTEST_WORKERS", None)
        env.pop("MAKEFLAGS", None)
        dry = subprocess.run(["make", "-n", "test"], capture_output=True, text=True, cwd=REPO, env=env,
                             check=True).stdout
        line = next(ln for ln in dry.splitlines() if "-m pytest" in ln)
        assert re.search(rf"-m pytest -n {workers} --dist loadgroup\b", line), (cores, line)

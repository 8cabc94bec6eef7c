"""One error path: every user error is one line with a documented exit code, never a traceback."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from rlrecipes.cli import main
from rlrecipes.errors import EXIT_ENVIRONMENT, EXIT_INTERNAL, EXIT_INVALID

RECIPE = "qwen2.5-0.5b-gsm8k-ppo"  # verl 0.5.0 image


def one_line_error(err: str) -> str:
    # progress bars of libraries (datasets' "Generating train split: ... examples/s]") are not errors
    lines = [line for line in err.splitlines() if line.strip() and not line.rstrip().endswith("/s]")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def fake_python(tmp_path):
    def make(name: str, body: str | None, mode: int = 0o755):
        path = tmp_path / name
        if body is None:
            path.mkdir()
        else:
            path.write_text(body)
            os.chmod(path, mode)
        return path

    return make


@pytest.mark.parametrize(("kind", "message"), [
    ("nothing", "RLRECIPES_VERL_0_5_0_PYTHON names nothing"),
    ("directory", "RLRECIPES_VERL_0_5_0_PYTHON names a directory"),
    ("not executable", "names a file that is not executable"),
    ("not a program", "cannot run the verl 0.5.0 interpreter"),
    ("not python", "not a working Python with verl 0.5.0"),
])
def test_verl_python_naming_nothing_usable_is_an_environment_error(monkeypatch, capsys, fake_python, tmp_path,
                                                                  kind, message):
    path = {"nothing": lambda: tmp_path / "nope",
            "directory": lambda: fake_python("dir", None),
            "not executable": lambda: fake_python("py", "#!/bin/sh\n", 0o644),
            "not a program": lambda: fake_python("py", "\x7fELF garbage"),
            "not python": lambda: fake_python("py", "#!/bin/sh\necho hello\nexit 0\n")}[kind]()
    monkeypatch.setenv("RLRECIPES_VERL_0_5_0_PYTHON", str(path))
    assert main(["validate", RECIPE]) == EXIT_ENVIRONMENT
    line = one_line_error(capsys.readouterr().err)
    assert message in line and str(path) in line


@pytest.mark.verl
def test_verl_python_with_the_wrong_verl_is_named_as_such(monkeypatch, capsys, verl_python):
    monkeypatch.setenv("RLRECIPES_VERL_0_8_0_PYTHON", str(verl_python("0.5.0")))
    assert main(["validate", "qwen2.5-3b-gsm8k-grpo-lora"]) == EXIT_ENVIRONMENT  # a verl 0.8.0 recipe
    assert "this interpreter has verl 0.5.0, not 0.8.0" in one_line_error(capsys.readouterr().err)


def test_an_unexpected_exception_is_one_line_with_its_own_exit_code(monkeypatch, capsys):
    import rlrecipes.cli.recipes as rc

    def boom(args):
        raise TypeError("unsupported operand")

    monkeypatch.setattr(rc, "list_recipes", boom)
    assert main(["recipes"]) == EXIT_INTERNAL
    line = one_line_error(capsys.readouterr().err)
    assert "internal error" in line and "TypeError: unsupported operand" in line and "bug" in line
    monkeypatch.setenv("RLRECIPES_DEBUG", "1")
    with pytest.raises(TypeError):
        main(["recipes"])


@pytest.mark.parametrize(("errno_name", "code"), [("EROFS", EXIT_INVALID), ("ENOSPC", 1), ("EACCES", EXIT_INVALID)])
def test_os_errors_reaching_the_top_are_one_line(monkeypatch, capsys, errno_name, code):
    import errno

    import rlrecipes.cli.recipes as rc

    def fail(args):
        raise OSError(getattr(errno, errno_name), os.strerror(getattr(errno, errno_name)), "/some/out/file")

    monkeypatch.setattr(rc, "list_recipes", fail)
    assert main(["recipes"]) == code
    line = one_line_error(capsys.readouterr().err)
    assert line.startswith("error: /some/out/file: ") and "hint:" in line


def test_recipe_errors_print_their_hint_on_the_same_line(capsys):
    assert main(["plan", "no-such-recipe"]) == EXIT_INVALID
    one_line_error(capsys.readouterr().err)


def test_exit_codes_are_documented():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "reliability.md").read_text()
    for code in ("0", "1", "2", "3", "70", "130"):
        assert f"| {code} |" in doc
    assert stat.S_ISREG(os.stat(Path(__file__)).st_mode)


# -- bad output paths: one line, exit 2, nothing written ----------------------------------------------

@pytest.fixture
def places(tmp_path):
    from tests.support.mounts import Mounts

    mounts = Mounts(tmp_path)
    (tmp_path / "afile").write_text("keep")
    (tmp_path / "adir").mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "metrics-20260101T000000Z.jsonl").write_text('{"step": 1, "data": {"critic/score/mean": 0.5}}\n')

    def place(kind: str) -> str:
        if kind == "read-only":
            return str(mounts("tmpfs", 1 << 20, readonly=True) / "out")
        return {"file": str(tmp_path / "afile"), "under a file": str(tmp_path / "afile" / "out"),
                "proc": "/proc/rlrecipes-out", "directory": str(tmp_path / "adir")}[kind]

    yield place
    mounts.cleanup()
    assert (tmp_path / "afile").read_text() == "keep"


COMMANDS = {
    "render": lambda out, tmp: ["render", "smoke-ppo", "--no-validate", "--out", out],
    "data": lambda out, tmp: ["data", "gsm8k", "--source", "tests/fixtures/gsm8k", "--out", out],
    "smoke-assets": lambda out, tmp: ["smoke-assets", "--out", out],
    "report": lambda out, tmp: ["report", str(tmp / "logs"), "--out", out],
    "preflight --env-file": lambda out, tmp: ["preflight", "smoke-ppo", "--env-file", out],
    "expect --out": lambda out, tmp: ["expect", "--log", str(tmp / "logs" / "metrics-20260101T000000Z.jsonl"),
                                      "--recipe", "smoke-ppo", "--profile", "any-1gpu", "--out", out],
}


@pytest.mark.parametrize("kind", ["file", "under a file", "proc", "read-only"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_bad_output_paths_are_one_line_errors(places, tmp_path, capsys, monkeypatch, command, kind):
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    if command in ("preflight --env-file", "expect --out") and kind == "file":
        kind = "directory"  # an env file (a result file) is a file: overwriting the old one is its job
    argv = COMMANDS[command](places(kind), tmp_path)
    code = main(argv)
    err = capsys.readouterr().err
    assert code == EXIT_INVALID, err
    line = one_line_error(err)
    assert line.startswith("error: ") and "hint:" in line


def test_env_file_naming_a_directory_and_gpu_inventory_naming_a_directory(places, capsys):
    for argv in (["preflight", "smoke-ppo", "--env-file", places("directory")],
                 ["preflight", "smoke-ppo", "--gpu-inventory", places("directory")]):
        assert main(argv) == EXIT_INVALID
        assert "Is a directory" in one_line_error(capsys.readouterr().err)


def test_report_skips_lines_with_a_step_that_is_not_a_whole_number(tmp_path, capsys):
    from rlrecipes.verl.run_metrics import read_jsonl

    path = tmp_path / "metrics-1.jsonl"
    path.write_text('{"step": NaN, "data": {}}\n{"step": Infinity, "data": {}}\n{"step": 1e999, "data": {}}\n'
                    '{"step": 1.5, "data": {}}\n{"step": true, "data": {}}\n{"step": -1, "data": {}}\n'
                    '{"step": "2", "data": {}}\n{"step": 3, "data": {"critic/score/mean": 0.5}}\n')
    launch = read_jsonl(path)
    assert launch.steps == {3: {"critic/score/mean": 0.5}} and launch.skipped_lines == 7

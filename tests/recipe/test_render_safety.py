"""The generated train.sh never runs text from YAML as a command; render never overwrites silently."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rlrecipes.recipe import overrides as ov
from rlrecipes.cli import main

REPO = Path(__file__).resolve().parents[2]
EVIL = [
    "$(touch PWNED)", "`touch PWNED`", "'; touch PWNED; '", "\"; touch PWNED; \"", "a\ntouch PWNED",
    "x && touch PWNED", "$PWNED_VAR", "\\", "#", "a b",
]


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A copy of the repository's recipes (RLRECIPES_HOME) with an adversarial recipe added."""
    root = tmp_path / "repo"
    shutil.copytree(REPO / "recipes", root / "recipes", ignore=shutil.ignore_patterns("*.sh"))
    monkeypatch.setenv("RLRECIPES_HOME", str(root))
    text = (REPO / "recipes" / "smoke-ppo.yaml").read_text()
    description = "toy PPO\ntouch PWNED\n$(touch PWNED) `touch PWNED`; echo \x1b[31m"
    text = text.replace("description: toy-scale PPO with critic on a tiny random Qwen2 (rig check)",
                        "description: " + '"' + description.encode("unicode_escape").decode().replace('"', '\\"') + '"')
    assert "touch PWNED" in text
    project = EVIL[0]
    text = text.replace("project: rlrecipes-smoke", f"project: '{project}'")
    (root / "recipes" / "evil.yaml").write_text(text)
    return root


def run_launcher(script: Path, cwd: Path, extra: list[str]) -> list[str]:
    """Run train.sh with a stand-in python3 that prints its arguments, one per line, NUL-separated."""
    bin_dir = cwd / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "python3"
    fake.write_text('#!/bin/sh\nif [ "$1" = "-c" ]; then echo /r/gsm8k.py; exit 0; fi\n'
                    'for a in "$@"; do printf "%s\\0" "$a"; done > "$ARGS_OUT"\n')
    fake.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", ARGS_OUT=str(cwd / "args"),
               LOG_DIR=str(cwd / "logs"), PWNED_VAR="expanded")
    done = subprocess.run(["bash", str(script), *extra], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return (cwd / "args").read_text().split("\0")[:-1]


def test_yaml_text_never_escapes_into_the_launch_script(home, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["render", "evil", "--no-validate", "--out", str(out)] +
                [f"+trainer.note{i}={value!r}" for i, value in enumerate(EVIL)]) == 0
    script = out / "train.sh"
    text = script.read_text()
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    for line in text.splitlines():
        assert "touch PWNED" not in line or line.startswith("#") or line.strip().startswith(("'", '"', "+", "trainer")), line
    work = tmp_path / "work"
    work.mkdir()
    argv = run_launcher(script, work, ["trainer.total_epochs=1"])
    assert not list(work.rglob("PWNED")) and not list(tmp_path.rglob("PWNED")), "a YAML value ran as a command"
    start = argv.index("verl.trainer.main_ppo")  # behind the stop guard: -m rlrecipes.verl.stopguard ... --
    assert argv[start - 1] == "-m"
    # Every value reaches verl as written (Hydra-quoted where needed), unexpanded by the shell.
    parsed = ov.parse_cli(argv[start + 1:])
    assert parsed["trainer.project_name"] == EVIL[0]
    given = ov.parse_cli([f"+trainer.note{i}={value!r}" for i, value in enumerate(EVIL)])
    for key, value in given.items():
        assert parsed[key] == value, key
    assert argv[-1] == "trainer.total_epochs=1"
    assert (work / "logs" / "evil").is_dir()


def test_render_refuses_to_overwrite_without_force(home, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["render", "smoke-ppo", "--no-validate", "--out", str(out)]) == 0
    (out / "train.sh").write_text("# my edits\n")
    (out / "notes.txt").write_text("mine")
    capsys.readouterr()
    assert main(["render", "smoke-ppo", "--no-validate", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "already holds config.yaml, train.sh, manifest.json" in err and "--force" in err
    assert (out / "train.sh").read_text() == "# my edits\n"
    assert main(["render", "smoke-ppo", "--no-validate", "--out", str(out), "--force"]) == 0
    assert (out / "train.sh").read_text().startswith("#!/usr/bin/env bash")
    assert (out / "notes.txt").read_text() == "mine"
    assert oct((out / "config.yaml").stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("kind", ["file", "proc", "under a file"])
def test_render_to_an_unusable_out_is_one_line(tmp_path, capsys, kind):
    target = {"file": tmp_path / "f", "proc": Path("/proc/rlrecipes-out"), "under a file": tmp_path / "f" / "x"}[kind]
    (tmp_path / "f").write_text("x")
    code = main(["render", "smoke-ppo", "--no-validate", "--out", str(target)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert (tmp_path / "f").read_text() == "x"

"""Fault suite for the stages that write: render, data, merge. A full disk (real ENOSPC on a size-capped
tmpfs), a read-only filesystem and a process killed mid-write must leave the previous output whole.
Mounting needs root; without it these tests skip."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rlrecipes.cli import main
from tests.support.mounts import Mounts, fill

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "tests" / "fixtures" / "gsm8k" / "jsonl"


@pytest.fixture
def mounts(tmp_path):
    m = Mounts(tmp_path)
    yield m
    m.cleanup()


def digests(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())
            if p.is_file() and not p.name.startswith(".")}


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip() and not line.rstrip().endswith("/s]")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


STAGES = {
    "render": lambda out: ["render", "smoke-ppo", "--no-validate", "--force", "--out", str(out)],
    "data": lambda out: ["data", "gsm8k", "--source", str(SOURCE), "--out", str(out)],
}


def _first_output(stage: str, out: Path, capsys) -> dict[str, str]:
    assert main(STAGES[stage](out)) == 0
    capsys.readouterr()
    before = digests(out)
    assert before
    return before


@pytest.mark.parametrize("stage", list(STAGES))
def test_disk_full_leaves_the_previous_output_whole(mounts, capsys, monkeypatch, stage):
    monkeypatch.chdir(REPO)
    where = mounts("tmpfs", 2 << 20)
    out = where / "out"
    before = _first_output(stage, out, capsys)
    if stage == "render":  # make the new content differ, so a half-replaced set would show
        monkeypatch.setenv("CKPT_DIR", "/elsewhere/" + "x" * 200)
    fill(where)
    assert main(STAGES[stage](out)) == 1
    assert "No space left on device" in one_line(capsys.readouterr().err)
    assert digests(out) == before
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]  # temporaries removed


@pytest.mark.parametrize("stage", list(STAGES))
def test_read_only_filesystem_leaves_the_previous_output_whole(mounts, capsys, monkeypatch, stage):
    monkeypatch.chdir(REPO)
    where = mounts("tmpfs", 8 << 20)
    out = where / "out"
    before = _first_output(stage, out, capsys)
    mounts.remount_readonly(where)
    assert main(STAGES[stage](out)) == 2
    assert "Read-only file system" in one_line(capsys.readouterr().err)
    assert digests(out) == before


# A stage run in a child process that is SIGKILLed at its N-th os.replace: the moment one file is in
# place and the next is not. Every file must then be wholly old or wholly new (never cut short).
KILL_AT_REPLACE = r'''
import os, signal, sys
count = {"n": 0}
real = os.replace
def replace(src, dst, *a, **k):
    count["n"] += 1
    if count["n"] == int(os.environ["KILL_AT"]):
        os.kill(os.getpid(), signal.SIGKILL)
    return real(src, dst, *a, **k)
os.replace = replace
from rlrecipes.cli import main
sys.exit(main(sys.argv[1:]))
'''


@pytest.mark.parametrize("kill_at", [1, 2, 3])
@pytest.mark.parametrize("stage", list(STAGES))
def test_killed_mid_write_leaves_every_file_old_or_new(tmp_path, capsys, monkeypatch, stage, kill_at):
    monkeypatch.chdir(REPO)
    out = tmp_path / "out"
    before = _first_output(stage, out, capsys)
    env = dict(os.environ, PYTHONPATH=str(REPO), KILL_AT=str(kill_at), CKPT_DIR="/elsewhere/new")
    extra = ["--template", "think"] if stage == "data" else []  # new content
    argv = STAGES[stage](out) + extra
    done = subprocess.run([sys.executable, "-c", KILL_AT_REPLACE, *argv], env=env, cwd=REPO, capture_output=True,
                          timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    after = digests(out)
    assert set(after) <= set(before)
    # the complete new output, for comparison
    fresh = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "rlrecipes", *STAGES[stage](fresh), *extra], env=env, cwd=REPO, check=True,
                   capture_output=True, timeout=300)
    new = digests(fresh)
    for name, digest in after.items():
        assert digest in (before[name], new.get(name)), f"{name} is neither the old nor the new file"
    if stage == "data" and (out / "manifest.json").exists():
        # the manifest goes first and lands last: it never describes parquet files that are not there
        manifest = json.loads((out / "manifest.json").read_text())
        for split, info in manifest["splits"].items():
            assert hashlib.sha256((out / f"{split}.parquet").read_bytes()).hexdigest() == info["sha256"]

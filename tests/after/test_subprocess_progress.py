"""Merge and eval run verl's merger and lm-eval as subprocesses: the log is named before they start and
their output streams while they run (rlrecipes.ui.run_logged), not only on failure."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from rlrecipes import ui

# The child prints a line, then waits for the parent to have passed that line on (a file appears):
# a parent that read the output only at the end would leave it waiting until its timeout.
CHILD = r"""
import os, sys, time
print("loading shards 1/2", flush=True)
sys.stdout.write("progress  10%\rprogress  90%\r")
sys.stdout.flush()
deadline = time.time() + 20
while not os.path.exists(sys.argv[1]) and time.time() < deadline:
    time.sleep(0.05)
print("seen by the parent" if os.path.exists(sys.argv[1]) else "TIMEOUT: nothing was streamed")
sys.exit(int(sys.argv[2]))
"""


class Watcher(io.StringIO):
    """A stderr that creates `flag` once it has seen `trigger` -- i.e. while the child still runs."""

    def __init__(self, trigger: str, flag: Path):
        super().__init__()
        self.trigger, self.flag = trigger, flag

    def write(self, text: str) -> int:
        if self.trigger in text:
            self.flag.touch()
        return super().write(text)


@pytest.fixture(autouse=True)
def _verbosity():
    yield
    ui.VERBOSITY = 0


@pytest.mark.parametrize(("verbosity", "trigger"), [
    (1, "loading shards 1/2"),  # -v: every line
    (0, "loading shards 1/2"),  # no terminal: the latest line, at most every PLAIN_EVERY_S
])
def test_output_streams_while_the_subprocess_runs(tmp_path, monkeypatch, verbosity, trigger):
    ui.VERBOSITY = verbosity
    monkeypatch.setattr(ui, "PLAIN_EVERY_S", 0.0)
    flag, log = tmp_path / "seen", tmp_path / "logs" / "merger.log"
    err = Watcher(trigger, flag)
    monkeypatch.setattr(sys, "stderr", err)
    code = ui.run_logged([sys.executable, "-c", CHILD, str(flag), "0"], log, "verl model_merger")
    text = err.getvalue()
    assert code == 0
    # the log is named first, before any of the child's output
    first = text.splitlines()[0]
    assert first == f"verl model_merger: output in {log} (tail -f to follow)"
    lines = log.read_text().splitlines()
    assert "seen by the parent" in lines and "TIMEOUT: nothing was streamed" not in lines
    assert log.read_text().splitlines()[0].startswith("$ ")  # the command, then its output
    assert "progress  90%" in log.read_text()
    assert text.splitlines()[-1].startswith("done verl model_merger (")


def test_quiet_prints_nothing_and_returns_the_exit_code(tmp_path, monkeypatch):
    ui.VERBOSITY = -1
    flag = tmp_path / "seen"
    flag.touch()  # nothing to wait for
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    assert ui.run_logged([sys.executable, "-c", CHILD, str(flag), "3"], tmp_path / "x.log", "lm-eval trained") == 3
    assert err.getvalue() == ""
    assert "seen by the parent" in (tmp_path / "x.log").read_text()


def test_a_failed_merger_names_its_log_which_survives(tmp_path, monkeypatch):
    # the merge's work dir is removed on failure: the log must live elsewhere and be named in the error
    from rlrecipes.errors import StageFailed
    from rlrecipes.after.merge import run_verl_merger

    fake = tmp_path / "verl"
    (fake / "model_merger").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "model_merger" / "__init__.py").write_text("")
    (fake / "model_merger" / "__main__.py").write_text("print('loading actor shards'); raise SystemExit(4)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    for name in [m for m in sys.modules if m == "verl" or m.startswith("verl.")]:
        monkeypatch.delitem(sys.modules, name)
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    log = tmp_path / "out.model_merger.log"
    with pytest.raises(StageFailed) as info:
        run_verl_merger(tmp_path / "actor", tmp_path / "merged", log)
    assert info.value.where == str(log) and "exit 4" in str(info.value)
    assert "loading actor shards" in log.read_text()
    assert err.getvalue().startswith(f"verl model_merger: output in {log}")

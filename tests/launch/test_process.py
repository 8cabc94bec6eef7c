"""How the stage engine and the stop guard start children (rlrecipes/process.py): a process group of its
own (a terminal's Ctrl-C reaches the child only through its parent, once), death with the parent (no trainer
left behind by a SIGKILL), and the status of a stopped child."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlrecipes.process import Ended, signal_name, spawn, wait_forwarding

REPO = Path(__file__).resolve().parents[2]


def test_a_child_has_its_own_process_group():
    child = spawn([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert os.getpgid(child.pid) == child.pid != os.getpgid(0)
    finally:
        child.kill()
        child.wait()


def test_a_child_dies_with_its_parent(tmp_path):
    pid_file = tmp_path / "grandchild"
    parent = subprocess.Popen([sys.executable, "-c", f"""
import sys, time
sys.path.insert(0, {str(REPO)!r})
from rlrecipes.process import spawn
child = spawn([sys.executable, "-c", "import time; time.sleep(60)"])
open({str(pid_file)!r}, "w").write(str(child.pid))
time.sleep(60)
"""])
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    grandchild = int(pid_file.read_text())
    parent.kill()  # SIGKILL: no handler of the parent's runs
    parent.wait()
    deadline = time.monotonic() + 10
    while True:
        try:
            os.kill(grandchild, 0)
            state = Path(f"/proc/{grandchild}/stat").read_text().split()[2]
        except (ProcessLookupError, FileNotFoundError):
            break
        if state == "Z":
            break
        assert time.monotonic() < deadline, "the child outlived its killed parent"
        time.sleep(0.05)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stop_passed_on_reports_128_plus_the_signal_even_when_the_child_exits_0(sig):
    child = spawn([sys.executable, "-c", """
import signal, sys, time
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, lambda *_: sys.exit(0))
print("ready", flush=True)
time.sleep(30)
"""], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "ready\n"
    os.kill(os.getpid(), 0)
    signal.setitimer(signal.ITIMER_REAL, 0.2)
    previous = signal.signal(signal.SIGALRM, lambda *_: os.kill(os.getpid(), sig))
    try:
        ended = wait_forwarding(child)
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert ended == Ended(128 + sig, sig) and ended.stopped and signal_name(ended.status) == sig.name


def test_a_child_ended_by_a_signal_reports_as_a_shell_does():
    ended = wait_forwarding(spawn([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]))
    assert ended == Ended(137, None) and not ended.stopped
    assert wait_forwarding(spawn([sys.executable, "-c", "raise SystemExit(3)"])) == Ended(3, None)

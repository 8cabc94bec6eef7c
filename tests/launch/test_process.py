"""How the stage engine and the stop guard start children (rlrecipes/process.py): a process group of its
own (a terminal's Ctrl-C reaches the child only through its parent, once), death with the parent (no trainer
left behind by a SIGKILL), and the status of a stopped child."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rlrecipes.process import Ended, run_forwarding, signal_name, spawn, stop_latch

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


CHILD = """
import signal, sys, time
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, lambda *_: sys.exit(0))
open(sys.argv[1], "w").close()
time.sleep(30)
"""


def stop_when(path: Path, sig: int) -> threading.Thread:
    """Send `sig` to this process once `path` exists (the child is ready for it)."""
    def wait_then_stop():
        deadline = time.monotonic() + 30
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), sig)

    thread = threading.Thread(target=wait_then_stop, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stop_passed_on_reports_128_plus_the_signal_even_when_the_child_exits_0(tmp_path, sig):
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    ready = tmp_path / "ready"
    try:
        stop_when(ready, sig)
        ended = run_forwarding([sys.executable, "-c", CHILD, str(ready)])
        # on its way out: another copy of the stop is ignored, so the stop can still be recorded and said
        assert all(signal.getsignal(s) == signal.SIG_IGN for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP))
        os.kill(os.getpid(), sig)
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    assert ended == Ended(128 + sig, sig) and ended.stopped and signal_name(ended.status) == sig.name


def test_a_stop_while_the_child_starts_is_passed_on_once_it_exists(tmp_path):
    """The handlers are in place before the child exists: a stop arriving meanwhile neither ends this process
    with the default action nor is lost."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    seen = tmp_path / "seen"
    child = f"import signal, sys, time\nsignal.signal(signal.SIGTERM, lambda *_: (open({str(seen)!r}, 'w').close(), sys.exit(0)))\ntime.sleep(30)\n"
    try:
        import rlrecipes.process as process

        real_spawn = process.spawn

        def slow_spawn(*args, **kwargs):  # the stop lands between the handlers and the child
            os.kill(os.getpid(), signal.SIGTERM)
            child_process = real_spawn(*args, **kwargs)
            time.sleep(1.0)  # the child sets its handler meanwhile
            return child_process

        process.spawn = slow_spawn
        try:
            ended = run_forwarding([sys.executable, "-c", child])
        finally:
            process.spawn = real_spawn
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    assert ended == Ended(143, signal.SIGTERM)


def test_a_child_ended_by_a_signal_reports_as_a_shell_does():
    ended = run_forwarding([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    assert ended == Ended(137, None) and not ended.stopped
    assert run_forwarding([sys.executable, "-c", "raise SystemExit(3)"]) == Ended(3, None)


def test_a_stop_between_two_children_under_the_latch_starts_no_second_child(tmp_path):
    """`reproduce` and the stage engine start one child after another: a stop landing between two (no child runs)
    must neither end the process with the default action, unsaid, nor start the next child."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    second_ran = tmp_path / "second-ran"
    try:
        with stop_latch():
            first = run_forwarding([sys.executable, "-c", "pass"])
            os.kill(os.getpid(), signal.SIGTERM)
            second = run_forwarding([sys.executable, "-c", f"open({str(second_ran)!r}, 'w').close()"])
        with stop_latch():  # a later latch starts clean (the stop belonged to the one before)
            third = run_forwarding([sys.executable, "-c", "raise SystemExit(3)"])
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    assert first == Ended(0, None)
    assert second == Ended(143, signal.SIGTERM) and not second_ran.exists()
    assert third == Ended(3, None)


def test_without_a_stop_the_latch_gives_the_handlers_back():
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    with stop_latch():
        assert run_forwarding([sys.executable, "-c", "pass"]) == Ended(0, None)
    assert {s: signal.getsignal(s) for s in handlers} == handlers

"""Child processes of a run, and the one way a stop signal reaches them.

Every process the stage engine starts (a stage of `reproduce`, the recipe's launcher) and the one the stop guard
starts (verl) is started by `spawn`:

- in a process group of its own, so a Ctrl-C typed in a terminal (SIGINT to the whole foreground group) reaches
  only the top process, which passes it on once -- the stop guard must see one stop, not three copies of it, or
  it takes the second copy for a second Ctrl-C and cuts a checkpoint save short;
- bound to its parent's life (Linux `PR_SET_PDEATHSIG`): a parent killed with SIGKILL (the OOM killer,
  `kill -9`) takes its child with it, instead of leaving a trainer that holds the GPU and keeps writing
  checkpoints under the next run's feet. Ray's own processes already share the fate of the verl driver that
  started them.

`run_forwarding` starts a child that way, waits for it and passes SIGTERM, SIGINT and SIGHUP on to it (`docker stop`, Ctrl-C, a pod
stop or a closed terminal). A child ended after a stop signal reached its parent reports 128 + that signal, the
status a shell gives a process the signal ended, whatever the child itself exited with: the stage was stopped,
not finished. From then on this process ignores further stop signals: it is on its way out, and a second copy
(GNU make passes its SIGTERM on to its child, which has its own from the terminal's process group) must not end
it before it has recorded and said where the same command goes on.

A process that starts one child after another (`reproduce`, the stage engine) holds `stop_latch()` over all of
them: a stop that lands while no child runs (between two stages, while a state file is written) is noted
instead of ending the process with the default action, silently; the next `run_forwarding` starts no child and
reports the stop, so the caller says and records where the same command goes on, as for a stop mid-stage.

Stdlib only: the stop guard imports it in every image, before anything else of rlrecipes.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1
_latched: list[int] | None = None  # the stop signals received under stop_latch(), in order


def _own_group_dying_with_parent(parent: int) -> None:
    """preexec_fn: a process group of its own; SIGKILL when the parent dies (Linux; elsewhere only the group)."""
    os.setpgid(0, 0)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(128 + signal.SIGKILL)


def spawn(argv: list[str], env: dict[str, str] | None = None, **popen) -> subprocess.Popen:
    parent = os.getpid()
    return subprocess.Popen(argv, env=env, preexec_fn=lambda: _own_group_dying_with_parent(parent), **popen)


def shell_status(returncode: int) -> int:
    """Popen's returncode as a shell reports it: -N (ended by signal N) is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def signal_name(status: int) -> str:
    """'SIGTERM' for 143, etc.; '' when the status is not 128 + a signal."""
    try:
        return signal.Signals(status - 128).name if status > 128 else ""
    except ValueError:
        return ""


@dataclass(frozen=True)
class Ended:
    status: int  # as a shell reports it; 128 + the stop signal when one was passed on
    stopped_by: int | None  # the first stop signal passed on to the child, if any

    @property
    def stopped(self) -> bool:
        return self.stopped_by is not None


@contextmanager
def stop_latch() -> Iterator[None]:
    """Note the stop signals that reach this process while no child runs, instead of dying of them: the next
    `run_forwarding` then starts nothing and reports the first of them (see the module's docstring)."""
    global _latched
    latched: list[int] = []
    outer, _latched = _latched, latched
    previous = {sig: signal.signal(sig, lambda signum, _frame: latched.append(signum)) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        _latched = outer
        if not latched:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def run_forwarding(argv: list[str], env: dict[str, str] | None = None, **popen) -> Ended:
    """Start `argv` (spawn) and wait for it, passing each stop signal this process receives on to it. The
    handlers are in place before the child starts: a stop that arrives while it starts is passed on once it
    exists, instead of ending this process with the default action (and the child with it, unsaved). Under
    `stop_latch()`, a stop noted before this call starts no child at all."""
    forwarded: list[int] = _latched if _latched is not None else []
    if forwarded:
        return Ended(128 + forwarded[0], forwarded[0])
    children: list[subprocess.Popen] = []

    def forward(signum, _frame):
        forwarded.append(signum)
        for child in children:
            try:
                child.send_signal(signum)
            except ProcessLookupError:
                pass

    previous = {sig: signal.signal(sig, forward) for sig in STOP_SIGNALS}
    try:
        child = spawn(argv, env, **popen)
        children.append(child)
        for signum in list(forwarded):  # arrived before the child existed
            child.send_signal(signum)
        code = child.wait()
    finally:
        if not forwarded:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    if forwarded:
        # Stopping: more copies of the stop (make passes its SIGTERM on to its child too; a second Ctrl-C) must not
        # end this process before it has said and recorded where the same command goes on.
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        return Ended(128 + forwarded[0], forwarded[0])
    return Ended(shell_status(code), None)

"""What the stages share in front of the user: progress display for the long after-training stages
(merge, eval) -- rich when it is installed, plain lines otherwise (the verl CPU venvs that the merge
tests run in have no rich) --, their subprocesses, logged to a file that is named up front and streamed
while they run, and the checkout's git commit that run directories and bug reports record."""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from rlrecipes.paths import repo_root

# Set once by the CLI's global options (`rlrecipes -v/-q/--log-level`): -1 quiet, 0 normal, 1+ verbose.
VERBOSITY = 0
LOG_LEVEL: str | None = None  # "debug" .. "error" when a global option chose one
PLAIN_EVERY_S = 30.0  # without a terminal, a subprocess's latest line is echoed at most this often


def console(**kwargs):
    """A rich Console on stdout for a command's tables. rich ends the process with exit 1 when the reader of a
    pipe leaves (Console.on_broken_pipe); this one raises BrokenPipeError instead, which the CLI turns into
    SIGPIPE's status, 141, like `--json` output and any Unix filter (`rlrecipes plan X | head -1`)."""
    from rich.console import Console

    class PipeConsole(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError

    return PipeConsole(**kwargs)


def _console():
    try:
        from rich.console import Console
    except ImportError:
        return None
    return Console(stderr=True)


@contextlib.contextmanager
def stage(label: str) -> Iterator[None]:
    """A spinner with elapsed time while `label` runs, then one line with how long it took (-q: nothing)."""
    if VERBOSITY < 0:
        yield
        return
    console = _console()
    started = time.monotonic()
    if console is None:
        print(f"... {label}", file=sys.stderr, flush=True)
        yield
        print(f"done {label} ({time.monotonic() - started:.1f} s)", file=sys.stderr, flush=True)
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        progress.add_task(label, total=None)
        yield
    console.print(f"[green]done[/green] {label} ({time.monotonic() - started:.1f} s)")


@contextlib.contextmanager
def progress_bar(label: str, total: int, enabled: bool = True) -> Iterator[Callable[[int], None]]:
    """A bar over `total` items; yields advance(n) (-q or enabled=False: shows nothing)."""
    if VERBOSITY < 0 or not enabled:
        yield lambda n=1: None
        return
    console = _console()
    if console is None:
        done = [0]

        def advance_plain(n: int = 1) -> None:
            done[0] += n
            print(f"{label}: {done[0]}/{total}", file=sys.stderr, flush=True)

        yield advance_plain
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console, transient=True) as progress:
        task = progress.add_task(label, total=total)
        yield lambda n=1: progress.advance(task, n)


def run_logged(cmd: list[str], log_file: Path, label: str, env: dict[str, str] | None = None) -> int:
    """Run a long subprocess (verl's merger, lm-eval) with its output in `log_file`, named before it starts.

    Its output is streamed while it runs: the latest line (tqdm's `\\r` updates included) next to the
    spinner; with `-v` every line on stderr; with `-q` nothing but errors. Returns the exit code.
    """
    log_file.parent.mkdir(parents=True, exist_ok=True)
    if VERBOSITY >= 0:
        print(f"{label}: output in {log_file} (tail -f to follow)", file=sys.stderr, flush=True)
    # A child Python writing to a pipe block-buffers: unbuffered, its lines arrive as they are printed.
    env = {**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    with open(log_file, "w", encoding="utf-8") as log:
        log.write("$ " + shlex.join(cmd) + "\n")
        log.flush()
        # text mode reads `\r` as a line end, so each progress-bar redraw is a line
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                encoding="utf-8", errors="replace", env=env)
        try:
            with _live_line(label) as show:
                for line in proc.stdout:
                    log.write(line)
                    log.flush()
                    show(line.rstrip())
            code = proc.wait()
        finally:
            if proc.poll() is None:  # interrupted: do not leave the child running
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
    if VERBOSITY >= 0:
        print(f"{'done' if code == 0 else 'failed'} {label} ({time.monotonic() - started:.1f} s, exit {code})",
              file=sys.stderr, flush=True)
    return code


@contextlib.contextmanager
def _live_line(label: str) -> Iterator[Callable[[str], None]]:
    if VERBOSITY > 0:
        yield lambda line: print(f"  {line}", file=sys.stderr, flush=True) if line else None
        return
    if VERBOSITY < 0:
        yield lambda line: None
        return
    console = _console()
    if console is None or not console.is_terminal:
        # a log file, CI, `docker compose logs`: the latest line every PLAIN_EVERY_S seconds
        last = [time.monotonic()]

        def show_plain(line: str) -> None:
            if line.strip() and time.monotonic() - last[0] >= PLAIN_EVERY_S:
                last[0] = time.monotonic()
                print(f"  {label}: {line.strip()[-160:]}", file=sys.stderr, flush=True)

        yield show_plain
        return
    from rich.markup import escape
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        task = progress.add_task(label, total=None)

        def show(line: str) -> None:
            if line.strip():
                progress.update(task, description=f"{escape(label)}: {escape(line.strip()[-100:])}")

        yield show


def git_commit() -> str | None:
    try:
        proc = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=repo_root(),
                              timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    # Dirty = a tracked file differs from HEAD; an untracked file (a run dir, a .env) changes no code.
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True,
                           cwd=repo_root())
    return proc.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")

"""Progress display for the long after-training stages (merge, eval): rich when it is installed,
plain lines otherwise (the verl CPU venvs that the merge tests run in have no rich)."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator

# Set once by the CLI's global options (`rlrecipes -v/-q/--log-level`): -1 quiet, 0 normal, 1+ verbose.
VERBOSITY = 0
LOG_LEVEL: str | None = None  # "debug" .. "error" when a global option chose one


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
def progress_bar(label: str, total: int) -> Iterator[Callable[[int], None]]:
    """A bar over `total` items; yields advance(n) (-q: shows nothing)."""
    if VERBOSITY < 0:
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

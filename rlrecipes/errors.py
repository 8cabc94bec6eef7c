"""Errors that the CLI turns into one clear line and an exit code.

Exit codes, the same for every subcommand (docs/reliability.md):

    0   ok
    1   the stage ran and failed (preflight found a problem, unhealthy watchdog, disk full, ...)
    2   invalid input: a bad argument, config value, recipe or file, or an output path that cannot be used
    3   the environment lacks something the command needs (a verl interpreter, torch, a GPU driver)
    70  internal error: a bug in rlrecipes (an unexpected exception; EX_SOFTWARE in sysexits.h)
    130 interrupted (Ctrl-C)
    141 the output pipe was closed by its reader (`rlrecipes plan --json | head`; 128 + SIGPIPE, as `yes | head`)
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1  # the stage ran and found a problem (preflight fail, unhealthy watchdog, ...)
EXIT_INVALID = 2  # the input itself is wrong (bad recipe, unknown key, malformed file)
EXIT_ENVIRONMENT = 3  # something the command needs is missing from this machine
EXIT_INTERNAL = 70  # an unexpected exception: a bug, never a user error
EXIT_INTERRUPTED = 130
EXIT_PIPE_CLOSED = 141  # 128 + SIGPIPE: what a shell reports for a filter whose reader went away


class RecipeError(Exception):
    """A user-facing error: bad input, named with what is wrong and where.

    `where` is a file path, a config key path or a row reference; `hint` is the fix. Printed as one
    line: `where: message (hint: ...)`.
    """

    exit_code = EXIT_INVALID

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.where = where
        self.hint = hint

    def __str__(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        if self.hint:
            text += f" (hint: {self.hint})"
        return text


class StageFailed(RecipeError):
    """A stage ran and failed for a reason outside the input (exit 1)."""

    exit_code = EXIT_FAILED


class EnvironmentMissing(RecipeError):
    """Something the command needs is not installed or not reachable on this machine (exit 3)."""

    exit_code = EXIT_ENVIRONMENT

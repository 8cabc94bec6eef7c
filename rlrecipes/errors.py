"""Errors that the CLI turns into a clear message and an exit code."""

from __future__ import annotations

# Exit codes shared by every subcommand.
EXIT_OK = 0
EXIT_FAILED = 1  # the stage ran and found a problem (preflight fail, unhealthy watchdog, ...)
EXIT_INVALID = 2  # the input itself is wrong (bad recipe, unknown key, malformed file)


class RecipeError(Exception):
    """A user-facing error: bad input, named with what is wrong and where.

    `where` is a file path, a config key path or a row reference; `hint` is the fix.
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
            text += f"\n  hint: {self.hint}"
        return text


class StageFailed(RecipeError):
    """A stage ran and failed for a reason outside the input (exit 1)."""

    exit_code = EXIT_FAILED

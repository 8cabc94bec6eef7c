"""`rlrecipes completion bash|zsh|tcsh`: a shell completion script (shtab) from the commands' own parsers."""

from __future__ import annotations

import argparse

from rlrecipes.cli import build_parser


def completion_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=("bash", "zsh", "tcsh"), help="the shell to complete in")


def completion(args: argparse.Namespace) -> int:
    import shtab

    print(shtab.complete(build_parser(full=True), shell=args.shell), end="")
    return 0

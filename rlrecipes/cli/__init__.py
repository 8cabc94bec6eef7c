"""The `rlrecipes` command line: one subcommand per pipeline stage.

Each subcommand is one module here, named after it (`rlrecipes resume-check` is rlrecipes/cli/resume_check.py),
and is imported only when it runs, so `rlrecipes --help` and `rlrecipes plan` stay fast and need neither torch
nor verl. A module named in COMMANDS defines `<func>_arguments(parser)` (adds its options) and
`<func>(args) -> int` (runs, returns the exit code); the work itself is done by the stage packages it calls.
The commands that take a recipe share `arguments.recipe_arguments()` (RECIPE, --profile, key=value overrides).
Modules keep heavy imports (torch, verl, transformers, datasets) inside their functions.

Global options come before the command: `-v`/`-vv`/`-q` or `--log-level LEVEL` set the log level of every
stage (and `-q` hides progress lines); `rlrecipes completion bash|zsh|tcsh` prints a shell completion
script (shtab, from the same parsers the commands use).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import logging
import os
import sys
import textwrap

from rlrecipes import __version__
from rlrecipes.errors import (EXIT_ENVIRONMENT, EXIT_FAILED, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_INVALID,
                              EXIT_PIPE_CLOSED, RecipeError)

# name -> (module, function, one-line help, examples)
COMMANDS: dict[str, tuple[str, str, str, str]] = {
    "validate": (
        "rlrecipes.cli.validate", "validate",
        "compose a recipe + profile + overrides and validate it against the pinned verl",
        "rlrecipes validate qwen2.5-0.5b-gsm8k-ppo\n"
        "rlrecipes validate qwen2.5-3b-gsm8k-grpo-lora --profile h100-80gb trainer.total_epochs=15",
    ),
    "plan": (
        "rlrecipes.cli.plan", "plan",
        "print the resolved plan: image, GPUs, batch arithmetic, steps, checkpoints, launch command",
        "rlrecipes plan qwen2.5-3b-gsm8k-grpo-lora\nrlrecipes plan qwen2.5-0.5b-gsm8k-ppo --json",
    ),
    "render": (
        "rlrecipes.cli.render", "render",
        "write a run directory: resolved verl config, launch script, manifest",
        "rlrecipes render qwen2.5-0.5b-gsm8k-ppo --out runs/p40-ppo",
    ),
    "launchers": (
        "rlrecipes.cli.launchers", "launchers",
        "regenerate recipes/*.sh from the YAML recipes (--check: fail if any is stale)",
        "rlrecipes launchers\nrlrecipes launchers --check",
    ),
    "recipes": (
        "rlrecipes.cli.recipes", "list_recipes",
        "list the shipped recipes and profiles",
        "rlrecipes recipes",
    ),
    "data": (
        "rlrecipes.cli.data", "data",
        "prepare a dataset (GSM8K) as verl parquet files with a manifest",
        "rlrecipes data gsm8k --out /workspace/data/gsm8k\n"
        "rlrecipes data gsm8k --source tests/fixtures/gsm8k --template think --out out/gsm8k",
    ),
    "score": (
        "rlrecipes.cli.score", "score",
        "score saved generations (parquet/jsonl) with the shared GSM8K scorer",
        "rlrecipes score lm_eval_out/samples_gsm8k.jsonl",
    ),
    "model": (
        "rlrecipes.cli.model", "model",
        "download a recipe's base model into the models directory (honours HF_TOKEN / hf auth login, HF_HUB_OFFLINE)",
        "rlrecipes model qwen2.5-3b-gsm8k-grpo-lora --models-dir /workspace/models",
    ),
    "preflight": (
        "rlrecipes.cli.preflight", "preflight",
        "check GPUs, memory, disk, shm, model, data and tracking before a launch",
        "rlrecipes preflight qwen2.5-0.5b-gsm8k-ppo\n"
        "rlrecipes preflight qwen2.5-3b-gsm8k-grpo-lora --gpu-inventory a100x4.json --json",
    ),
    "env": (
        "rlrecipes.cli.env", "env",
        "print the environment block a bug report needs (driver, CUDA, GPUs, versions)",
        "rlrecipes env",
    ),
    "watchdog": (
        "rlrecipes.cli.watchdog", "watchdog",
        "keep checkpoints within a disk budget and the resume tracker valid",
        "rlrecipes watchdog --root /workspace/checkpoints --keep-last 3 --min-free 20G",
    ),
    "resume-check": (
        "rlrecipes.cli.resume_check", "resume_check",
        "repair verl's checkpoint tracker so auto-resume continues instead of restarting at step 0",
        "rlrecipes resume-check --root /workspace/checkpoints",
    ),
    "healthcheck": (
        "rlrecipes.cli.healthcheck", "healthcheck",
        "exit 0 when the watchdog's status file is fresh and healthy (for Compose)",
        "rlrecipes healthcheck --status /workspace/checkpoints/.watchdog/status.json",
    ),
    "smoke-assets": (
        "rlrecipes.cli.smoke_assets", "smoke_assets",
        "build a tiny random Qwen2 model, tokenizer and GSM8K-shaped data, offline",
        "rlrecipes smoke-assets --out /workspace/smoke",
    ),
    "canary-assets": (
        "rlrecipes.cli.canary_assets", "canary_assets",
        "build the learning canary: chained-addition data and a small Qwen2 warm-started by SFT, offline",
        "rlrecipes canary-assets --out /workspace/canary",
    ),
    "smoke": (
        "rlrecipes.cli.smoke", "smoke",
        "train the smoke recipes on this GPU, kill, resume, merge, and print a pass/fail table",
        "rlrecipes smoke --assets /workspace/smoke",
    ),
    "merge": (
        "rlrecipes.cli.merge", "merge",
        "turn a checkpoint into a Hugging Face model (LoRA fused), verified",
        "rlrecipes merge /workspace/checkpoints/qwen2.5-3b-gsm8k-grpo-lora --out /workspace/models/merged",
    ),
    "eval": (
        "rlrecipes.cli.eval", "evaluate",
        "run lm-eval GSM8K on a model (and a baseline) and print the table with deltas",
        "rlrecipes eval /workspace/models/merged --baseline /workspace/models/Qwen2.5-3B-Instruct",
    ),
    "report": (
        "rlrecipes.cli.report", "report",
        "plots and a one-page report from a run's logs",
        "rlrecipes report /workspace/logs/qwen2.5-3b-gsm8k-grpo-lora --out reports/grpo",
    ),
    "expect": (
        "rlrecipes.cli.expect", "expect",
        "judge a run's logs against its recipe's expect: block (exit 0 met, 1 missed, 2 bad input)",
        "rlrecipes expect /workspace/logs/qwen2.5-3b-gsm8k-grpo-lora --recipe qwen2.5-3b-gsm8k-grpo-lora "
        "--profile a100-80gb\n"
        "rlrecipes expect --log metrics-20260101T000000Z.jsonl --recipe smoke-grpo-lora --profile any-1gpu-hopper "
        "--json",
    ),
    "stage": (
        "rlrecipes.cli.stage", "stage",
        "run one stage of a run as the images' entry point does (run, data, model, preflight, train, resume, ...)",
        "RECIPE=qwen2.5-0.5b-gsm8k-ppo rlrecipes stage resume trainer.total_epochs=2\n"
        "rlrecipes stage --recipe canary-grpo-lora --profile any-1gpu-hopper run",
    ),
    "reproduce": (
        "rlrecipes.cli.reproduce", "reproduce",
        "one run from nothing to its verdict: data, model, train, merge, eval, report, expect -- resumable",
        "rlrecipes reproduce canary-grpo-lora\nrlrecipes reproduce canary-ppo --list",
    ),
    "cluster": (
        "rlrecipes.cli.cluster", "cluster",
        "show the Ray cluster a launch would use (RAY_ADDRESS) and check nodes x GPUs",
        "RAY_ADDRESS=10.0.0.1:6379 rlrecipes cluster qwen2.5-3b-gsm8k-grpo-lora",
    ),
    "completion": (
        "rlrecipes.cli.completion", "completion",
        "print a shell completion script (bash, zsh or tcsh) for every command and option",
        "s=$(rlrecipes completion bash) && printf '%s\\n' \"$s\" > ~/.local/share/bash-completion/completions/rlrecipes\n"
        "s=$(rlrecipes completion zsh) && printf '%s\\n' \"$s\" > \"${fpath[1]}/_rlrecipes\"  # nothing written on failure",
    ),
    "runpod-template": (
        "rlrecipes.cli.runpod_template", "runpod_template",
        "validate deploy/runpod/template.json and print the RunPod CLI create command",
        "rlrecipes runpod-template",
    ),
}


LOG_LEVELS = ("debug", "info", "warning", "error")


def build_parser(full: bool = False) -> argparse.ArgumentParser:
    """The top-level parser. `full` also gives every command its own arguments (imports every command
    module: for shell completion only -- a normal run imports just the command it runs)."""
    parser = argparse.ArgumentParser(
        prog="rlrecipes",
        description="Reproducible verl recipes: validate, plan, run and report RL post-training.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Global options go before COMMAND. Run `rlrecipes COMMAND --help` for a command's options and "
               "examples.\nExit codes: 0 ok, 1 stage failed, 2 invalid input, 3 missing environment, "
               "70 internal error, 130 interrupted, 141 output pipe closed.\n"
               "Shell completion: rlrecipes completion bash|zsh|tcsh (see README).",
    )
    parser.add_argument("--version", action="version", version=f"rlrecipes {__version__}")
    verbosity = parser.add_mutually_exclusive_group()
    verbosity.add_argument("-v", "--verbose", action="count", default=0,
                           help="more output: -v logs at info level and streams subprocess output, -vv at debug")
    verbosity.add_argument("-q", "--quiet", action="store_true", help="errors only: no progress lines")
    verbosity.add_argument("--log-level", choices=LOG_LEVELS, help="log level of every stage (default: warning)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, func_name, help_text, examples) in COMMANDS.items():
        if not full:
            sub.add_parser(name, help=help_text, add_help=False)
            continue
        command = sub.add_parser(name, help=help_text, description=help_text,
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="examples:\n" + textwrap.indent(examples, "  "))
        getattr(importlib.import_module(module_name), f"{func_name}_arguments")(command)
    return parser


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is when a record is emitted (pytest and rich swap it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def _split_global_options(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """Parse the global options in front of the command; the rest belongs to the command."""
    top = build_parser()
    index = 0
    while index < len(argv) and argv[index].startswith("-") and argv[index] not in ("-h", "--help", "--version"):
        index += 2 if argv[index] == "--log-level" else 1
    options, unknown = top.parse_known_args(argv[:index])
    if unknown:
        top.error(f"unknown option {unknown[0]!r} before the command (global options: -v, -q, --log-level, "
                  "--version; a command's own options go after it)")
    return options, argv[index:]


def _setup_logging(options: argparse.Namespace) -> None:
    from rlrecipes import ui

    ui.VERBOSITY = -1 if options.quiet else options.verbose
    if options.log_level:
        level = options.log_level
    elif options.quiet:
        level = "error"
    elif options.verbose:
        level = "info" if options.verbose == 1 else "debug"
    else:
        ui.LOG_LEVEL = None
        return  # Python's default: warnings and errors reach stderr
    ui.LOG_LEVEL = level
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _StderrHandler)]:
        root.removeHandler(handler)
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(level.upper())


def _command_parser(name: str) -> tuple[argparse.ArgumentParser, object]:
    module_name, func_name, help_text, examples = COMMANDS[name]
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(
        prog=f"rlrecipes {name}",
        description=help_text,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n" + textwrap.indent(examples, "  "),
    )
    getattr(module, f"{func_name}_arguments")(parser)
    return parser, getattr(module, func_name)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    options, argv = _split_global_options(argv)
    top = build_parser()
    if not argv or argv[0] in ("-h", "--help"):
        top.print_help()
        return 0
    if argv[0] == "--version":
        top.parse_args(argv)
    name = argv[0]
    if name not in COMMANDS:
        top.error(f"unknown command {name!r}; choose from: {', '.join(COMMANDS)}")
    _setup_logging(options)
    try:
        parser, run = _command_parser(name)
        args = parser.parse_intermixed_args(argv[1:])
        code = int(run(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers, not at interpreter exit
        return code
    except BrokenPipeError:
        # `rlrecipes plan --json | head`: the reader left. Quiet, like any Unix filter, with SIGPIPE's
        # status; stdout goes to /dev/null so the interpreter's final flush cannot raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE_CLOSED
    except RecipeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except ImportError as exc:
        # Stages import their heavy dependencies (torch, verl, ...) when they run.
        print(f"error: {name} needs {exc.name or exc}, which is not installed in {sys.executable} "
              f"(hint: run it in the image that has it, or pip install the missing package)", file=sys.stderr)
        return EXIT_ENVIRONMENT
    except OSError as exc:
        return _os_error(exc)
    except MemoryError:
        print(f"error: {name}: out of memory", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:  # a bug: say so in one line, not as a traceback that looks like a user error
        if os.environ.get("RLRECIPES_DEBUG"):
            raise
        print(f"internal error in `rlrecipes {name}`: {type(exc).__name__}: {exc} (this is a bug in rlrecipes; "
              "RLRECIPES_DEBUG=1 shows the traceback)", file=sys.stderr)
        return EXIT_INTERNAL


# errno -> (exit code, hint) for OSErrors that reach the top: a path the user named cannot be used.
_OS_HINTS = {
    errno.EROFS: (EXIT_INVALID, "the filesystem is read-only: pick a path on a writable one"),
    errno.EACCES: (EXIT_INVALID, "no permission: pick a path this user may write, or fix its owner/mode"),
    errno.EPERM: (EXIT_INVALID, "operation not permitted here: pick another path"),
    errno.EISDIR: (EXIT_INVALID, "a directory is in the way: name a file, or remove the directory"),
    errno.ENOTDIR: (EXIT_INVALID, "a file is in the way of a directory: pick another path"),
    errno.EEXIST: (EXIT_INVALID, "something already exists there: pick another path or remove it"),
    errno.ENOENT: (EXIT_INVALID, "check the path"),
    errno.ENAMETOOLONG: (EXIT_INVALID, "shorten the path"),
    errno.ELOOP: (EXIT_INVALID, "a symlink loop: fix the path"),
    errno.EINVAL: (EXIT_INVALID, "this filesystem does not accept that (e.g. /proc, /sys): pick a normal directory"),
    errno.ENOSPC: (EXIT_FAILED, "the disk is full: free space and run again (nothing was replaced)"),
    errno.EDQUOT: (EXIT_FAILED, "the disk quota is exhausted: free space and run again (nothing was replaced)"),
}


def _os_error(exc: OSError) -> int:
    code, hint = _OS_HINTS.get(exc.errno, (EXIT_FAILED, ""))
    where = exc.filename if exc.filename is not None else ""
    what = exc.strerror or str(exc)
    line = f"error: {where}: {what}" if where else f"error: {what}"
    print(line + (f" (hint: {hint})" if hint else ""), file=sys.stderr)
    return code

if __name__ == "__main__":
    raise SystemExit(main())

"""`rlrecipes expect`: judge a run's logs against its recipe's `expect:` block (rlrecipes.after.expect).

Reads only: the logs (as `rlrecipes report` reads them), the recipe, the eval summary. Writes nothing but
the JSON result, and that only with --out (temp file + rename), never over one of those inputs (exit 2).
Exit 0: the outcome is met (with --strict: and the cost); 1: missed -- an outcome check missed, or one the
contract requires not measured; 2: bad input (no such recipe or profile, an empty log, a log of another recipe,
a malformed eval summary, an --out over an input).
"""

from __future__ import annotations

import argparse
import json
import sys

from rlrecipes.errors import RecipeError
from rlrecipes.fsutil import atomic_write_text, refuse_overwrite


def expect_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", nargs="?",
                        help="the run's log directory (LOG_DIR/<recipe>: metrics-*.jsonl and/or console-*.log)")
    parser.add_argument("--log", action="append", default=[], metavar="FILE",
                        help="a metrics file (metrics-<stamp>.jsonl or console-<stamp>.log); repeatable")
    parser.add_argument("--recipe", required=True,
                        help="the recipe the run trained (its expect: block is the contract)")
    parser.add_argument("--profile", required=True, help="the profile it ran on (s/step and memory are per profile)")
    parser.add_argument("--eval", metavar="DIR", help="output directory of `rlrecipes eval` (held-out accuracy, "
                                                      "the merged model's score)")
    parser.add_argument("--gpu", metavar="NAME",
                        help="the GPU model the run ran on, as nvidia-smi names it (default: the profile's, where it "
                             "names one model): a cost is compared only with a reference measured on that model")
    parser.add_argument("--strict", action="store_true",
                        help="the cost (s/step, peak memory against the reference) counts in the verdict too")
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of the summary")
    parser.add_argument("--out", metavar="FILE", help="also write the JSON result to FILE (atomically)")


def expect(args: argparse.Namespace) -> int:
    from rlrecipes.after.expect import check_run, print_table

    if not args.run_dir and not args.log:
        raise RecipeError("no run to judge", where="arguments", hint="give RUN_DIR or --log FILE")
    if args.out:
        refuse_overwrite("--out", args.out, expect_inputs(args), hint="write the verdict beside the logs, e.g. "
                                                                      "LOG_DIR/<recipe>/expect.json")
    result = check_run(args.recipe, args.profile, args.run_dir, args.log, args.eval, gpu=args.gpu,
                       strict=args.strict)
    text = json.dumps(result.as_dict(), indent=2) + "\n"
    if args.out:
        atomic_write_text(args.out, text)
    if args.json:
        sys.stdout.write(text)
    else:
        print_table(result)
    return result.exit_code


def expect_inputs(args: argparse.Namespace) -> list:
    """What `expect` reads: the run's logs, the eval summary, the recipe and profile files."""
    from rlrecipes.after.evaluate import SUMMARY_FILE
    from rlrecipes.fsutil import Input
    from rlrecipes.recipe.load import load_profile, load_recipe
    from rlrecipes.verl.run_metrics import log_inputs

    inputs = log_inputs(args.run_dir, args.log)
    inputs.append(Input("the eval summary", args.eval, reads=(SUMMARY_FILE,)))
    inputs += [Input("the recipe", load_recipe(args.recipe).path),
               Input("the profile", load_profile(args.profile).path)]
    return inputs

"""`rlrecipes report`: plots, tables and the HTML page of a run from its logs (rlrecipes/report/).

The set (report.md, report.html, summary.json, the plots) is built in a folder beside --out and swapped in
whole (fsutil.atomic_dir): an interrupted report leaves the previous set or none. --out is never one of
the inputs (the logs, the eval summary, the recipe) nor a folder holding one (exit 2).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rlrecipes.errors import RecipeError


def report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", nargs="?",
                        help="the run's log directory (LOG_DIR/<recipe>: metrics-*.jsonl and/or console-*.log)")
    parser.add_argument("--log", action="append", default=[], metavar="FILE",
                        help="a metrics file (metrics-<stamp>.jsonl or console-<stamp>.log); repeatable")
    parser.add_argument("--eval", metavar="DIR", help="output directory of `rlrecipes eval` (adds its table)")
    parser.add_argument("--title", help="report title (default: the run directory's name)")
    parser.add_argument("--recipe", help="the recipe the run trained, for its published reference accuracy "
                                         "(default: the run directory's name when it names a shipped recipe)")
    parser.add_argument("--profile", help="the profile it ran on: with the recipe, adds the table of its expect: "
                                          "block (`rlrecipes expect`) and draws the recorded run of that profile's "
                                          "stack as the reference curve, where there is one")
    parser.add_argument("--gpu", metavar="NAME",
                        help="with --profile: the GPU model the run ran on, as nvidia-smi names it (as for `rlrecipes "
                             "expect`): a cost is compared only with a reference measured on that model")
    parser.add_argument("--out", required=True, help="directory for report.md, report.html, summary.json, PNGs "
                                                     "(replaced as a whole; never one holding the inputs)")


def report(args: argparse.Namespace) -> int:
    from rlrecipes.verl.run_metrics import load_run
    from rlrecipes.report.plots import write_plots
    from rlrecipes.fsutil import atomic_dir, claim_output, refuse_overwrite
    from rlrecipes.report.writer import build_report, check_report_dir, headline_rows, write_report

    if not args.run_dir and not args.log:
        raise RecipeError("nothing to report on", where="arguments", hint="give RUN_DIR or --log FILE")
    out = Path(args.out)
    refuse_overwrite("--out", out, report_inputs(args), hint="write the report outside the run's logs, "
                                                              "e.g. reports/<recipe>")
    check_report_dir(out)
    run = load_run(args.run_dir, args.log)
    if not run.steps:
        raise RecipeError("the metrics files hold no logged steps", where=args.run_dir or ", ".join(args.log))
    recipe = args.recipe or (Path(args.run_dir).name if args.run_dir else None)
    expected = None
    if args.gpu and not args.profile:
        raise RecipeError("--gpu weighs the cost of a contract: it needs --profile", where="--gpu",
                          hint="give --recipe NAME --profile NAME, or leave --gpu out")
    if args.profile:
        from rlrecipes.after.expect import check_run

        if not recipe:
            raise RecipeError("--profile needs the recipe", where="arguments", hint="give --recipe NAME")
        expected = check_run(recipe, args.profile, args.run_dir, args.log, args.eval, gpu=args.gpu)
    eval_header = eval_rows = fast_header = fast_rows = None
    if args.eval:
        from rlrecipes.after.evaluate import fast_eval_cells, load_summary, summary_cells

        summary = load_summary(args.eval)
        eval_header, eval_rows = summary_cells(summary)
        fast_header, fast_rows = fast_eval_cells(summary)
    from rlrecipes.reference import reference_curve

    curve = reference_curve(recipe, args.profile)
    claim = claim_output(out, "report")  # one report per --out; what a killed one left beside it removed
    with claim, atomic_dir(out) as work:
        plots, missing = write_plots(run, work, curve)
        title = args.title or f"Run report: {Path(args.run_dir).name if args.run_dir else Path(args.log[0]).stem}"
        data = build_report(run, plots, missing, title, eval_rows, eval_header, fast_rows, fast_header)
        _add_checks(data, run, recipe)
        if curve is not None and "val_accuracy" in plots:
            data["headline"].update(reference_curve=curve.key, reference_curve_what=curve.what,
                                    reference_curve_source=curve.source)
        if expected is not None:
            data["expect"] = expected.as_dict()
        paths = {key: out / path.name for key, path in write_report(data, work).items()}
    _print_summary(title, headline_rows(data["headline"]), paths, len(plots), data["warnings"])
    if expected is not None:  # one line: `rlrecipes expect` prints the checks (make reproduce runs it next)
        from rlrecipes.after.expect import verdict_line

        print(f"expected result: {verdict_line(expected)} (each check: {paths['md']})")
    return 0


def report_inputs(args: argparse.Namespace) -> list:
    """What `report` reads: the run's logs, the eval summary and, with --profile, the recipe and profile."""
    from rlrecipes.after.evaluate import SUMMARY_FILE
    from rlrecipes.fsutil import Input
    from rlrecipes.verl.run_metrics import log_inputs

    inputs = log_inputs(args.run_dir, args.log)
    inputs.append(Input("the eval summary", args.eval, reads=(SUMMARY_FILE,)))
    if args.profile and (args.recipe or args.run_dir):
        from rlrecipes.recipe.load import load_profile, load_recipe

        inputs += [Input("the recipe", load_recipe(args.recipe or Path(args.run_dir).name).path),
                   Input("the profile", load_profile(args.profile).path)]
    return inputs


def _add_checks(data: dict, run, recipe: str | None) -> None:
    """What the logs alone cannot say: the recipe's published accuracy, and whether the rollout engine
    generated with the policy being trained (verl's rollout-vs-actor probability metrics)."""
    from rlrecipes.reference import reference_accuracy
    from rlrecipes.verl.rollout_sync import check_rollout_sync

    head = data["headline"]
    ref = reference_accuracy(recipe) if recipe else None
    if ref is not None:
        head.update(reference_accuracy=ref.accuracy, reference_what=ref.what, reference_source=ref.source)
    verdict = check_rollout_sync(run.steps)
    head.update(rollout_sync=verdict.status, rollout_sync_detail=verdict.detail)
    if verdict.flagged:
        data["warnings"].insert(0, f"ROLLOUT NOT IN SYNC WITH THE ACTOR: {verdict.detail}")


def _print_summary(title: str, rows: list[tuple[str, str]], paths: dict, n_plots: int, warnings: list[str]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(title)
        for key, value in rows:
            print(f"  {key}: {value}")
    else:
        table = Table(title=title, show_header=False)
        table.add_column(style="bold")
        table.add_column()
        for key, value in rows:
            table.add_row(key.replace("`", ""), value.replace("`", ""))
        Console().print(table)
    for warning in warnings:
        print(f"note: {warning}")
    print(f"wrote {paths['md']}, {paths['html']} and {n_plots} plot(s) in {paths['md'].parent}")

"""report.md and a single-file report.html (plots embedded as base64) from a run's metrics."""

from __future__ import annotations

import base64
import html
import json
from datetime import datetime, timezone
from pathlib import Path

from rlrecipes.fsutil import atomic_write_text
from rlrecipes.verl.run_metrics import RunMetrics, headline, phase_medians
from rlrecipes.verl.startup import MILESTONES, run_startups
from rlrecipes.report.plots import PANELS


def fmt_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def fmt_count(n: float) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.2f}{unit}"
    return f"{n:.0f}"


def headline_rows(head: dict) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    if head.get("accuracy_metric") and "start_accuracy" in head:
        rows.append(("Validation accuracy", f"{head['start_accuracy']:.4f} (step {head['start_step']}) -> "
                     f"{head['end_accuracy']:.4f} (step {head['end_step']})"))
        rows.append(("Best validation accuracy", f"{head['best_accuracy']:.4f} at step {head['best_step']}"))
        rows.append(("Accuracy metric", f"`{head['accuracy_metric']}`"))
    else:
        rows.append(("Validation accuracy", "not logged"))
    if "reference_accuracy" in head:
        run_best = f"; this run's best: {head['best_accuracy']:.4f}" if "best_accuracy" in head else ""
        rows.append(("Published reference", f"{head['reference_accuracy']:.3f} -- {head['reference_what']} "
                     f"({head['reference_source']}){run_best}"))
    if "reference_curve" in head:
        rows.append(("Reference curve", f"`{head['reference_curve']}` (grey, in the validation plot) -- "
                     f"{head['reference_curve_what']} ({head['reference_curve_source']})"))
    if "reward_metric" in head:
        rows.append((f"Reward (`{head['reward_metric']}`)", f"{head['start_reward']:.4f} -> {head['end_reward']:.4f}"))
    if head.get("last_step") is not None:
        restarts = head["restarts"]
        rows.append(("Steps logged", f"{head['first_step']} .. {head['last_step']}, {head['launches']} launch(es)"
                     + (f", {restarts} restart(s)" if restarts else "")))
    if "train_seconds" in head:
        rows.append(("Training time", f"{fmt_duration(head['train_seconds'])} "
                     f"({head['seconds_per_step']:.1f} s/step)"))
    sync = head.get("rollout_sync")
    if sync and sync != "not logged":
        label = sync.upper() if sync == "not in sync" else sync
        rows.append(("Rollout vs actor", f"{label}: {head['rollout_sync_detail']}"))
    if "tokens" in head:
        rows.append(("Tokens processed", fmt_count(head["tokens"])))
    if "throughput" in head:
        rows.append(("Mean throughput", f"{head['throughput']:.1f} tokens/s per GPU"))
    return rows


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    def cell(text: str) -> str:  # a `|` inside a cell would end it
        return str(text).replace("|", "\\|")

    lines = ["| " + " | ".join(map(cell, header)) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return lines


def phase_rows(phases: dict) -> list[list[str]]:
    """Each phase's median seconds and each MFU's median (rlrecipes.verl.run_metrics.phase_medians), as rows."""
    rows = [[name, f"`{v['metric']}`", f"{v['median_s']:.2f} s", str(v["steps"])]
            for name, v in phases.get("phases", {}).items()]
    rows += [[f"MFU, {key.removeprefix('perf/mfu/')}", f"`{key}`", f"{v['median']:.3f}", str(v["steps"])]
             for key, v in phases.get("mfu", {}).items()]
    return rows


def engine_cell(engine: dict) -> str:
    """One vLLM engine's own start (rlrecipes.verl.startup.EngineInit, as the report keeps it): its init, with
    torch.compile's part and the graph capture ("none" where vLLM printed no such part)."""
    def part(value: float | None) -> str:
        return "none" if value is None else fmt_duration(value)
    return f"{fmt_duration(engine['init_s'])} ({part(engine['compile_s'])}; {part(engine['graphs_s'])})"


def startup_rows(startups: list[dict]) -> tuple[list[str], list[list[str]]]:
    """The start-up of each launch (rlrecipes.verl.startup), a column each: (header, rows)."""
    header = ["phase (from the line before)"] + [s["log"] for s in startups]
    rows = []
    for key, what, _ in MILESTONES:
        if any(key in s["phases"] for s in startups):
            rows.append([f"{key}: {what}"] + [fmt_duration(s["phases"][key]) if key in s["phases"] else "-"
                                              for s in startups])
        if key == "rollout" and any(s.get("engines") for s in startups):
            rows.append(["of it, vLLM's engine init (torch.compile; CUDA graphs)"]
                        + ["; ".join(engine_cell(e) for e in s.get("engines", [])) or "-" for s in startups])
    rows.append(["**launch to ready to fit**" if all(s["from_launch"] for s in startups) else "**in all**"]
                + [f"**{fmt_duration(s['total_s'])}**" + ("" if s["from_launch"] else " (from Ray on)")
                   for s in startups])
    return header, rows


def build_report(run: RunMetrics, plots: dict[str, Path], missing: list[str], title: str,
                 eval_rows: list[list[str]] | None = None, eval_header: list[str] | None = None,
                 fast_rows: list[list[str]] | None = None, fast_header: list[str] | None = None) -> dict:
    """Everything the report shows, as data (rendered to Markdown and HTML below, dumped to summary.json)."""
    return {
        "title": title,
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "sources": [f"{launch.path.name} ({launch.kind}, steps {launch.first_step}..{launch.last_step})"
                    for launch in run.launches],
        "headline": headline(run),
        "phases": phase_medians(run),
        "startup": [{"log": s.log.name, "from_launch": s.from_launch, "total_s": round(s.total_s, 1),
                     "phases": {p.key: round(p.seconds, 1) for p in s.phases},
                     "engines": [{"init_s": e.init_s, "compile_s": e.compile_s, "graphs_s": e.graphs_s,
                                  "load_s": e.load_s} for e in s.engines]}
                    for s in run_startups([launch.path for launch in run.launches])],
        "eval_header": eval_header or [],
        "eval_rows": eval_rows or [],
        "fast_header": fast_header or [],
        "fast_rows": fast_rows or [],
        "plots": {name: path.name for name, path in plots.items()},
        "missing_panels": missing,
        "warnings": list(run.warnings),
    }


def render_markdown(report: dict) -> str:
    lines = [f"# {report['title']}", "", f"Generated {report['generated']} from:", ""]
    lines += [f"- `{source}`" for source in report["sources"]]
    lines += ["", "## Headline", ""]
    lines += _md_table(["", "value"], [list(r) for r in headline_rows(report["headline"])])
    rows = phase_rows(report.get("phases", {}))
    if rows:
        left_out = ", ".join(map(str, report["phases"]["warmup_steps_left_out"]))
        note = f", each launch's first timed step ({left_out}) left out where others logged it" if left_out else ""
        lines += ["", "## Where a step's time goes", "", f"Median over the steps that logged each{note}.", ""]
        lines += _md_table(["phase", "metric", "median", "steps"], rows)
    if report.get("startup"):
        header, rows = startup_rows(report["startup"])
        lines += ["", "## Start-up", "", "From each launch to the lines verl prints on its way to the first step; "
                  "the first validation and the steps are in their own timers.", ""]
        lines += _md_table(header, rows)
    if report["eval_rows"]:
        lines += ["", "## Evaluation (lm-eval, exact_match)", ""]
        lines += _md_table(report["eval_header"], report["eval_rows"])
    if report.get("fast_rows"):
        lines += ["", "## Fast evaluation (training reward on the GSM8K test parquet)", ""]
        lines += _md_table(report["fast_header"], report["fast_rows"])
    if report.get("expect"):
        lines += ["", "## Expected result (`rlrecipes expect`)", ""] + expect_section(report["expect"])
    lines += ["", "## Plots", ""]
    titles = {panel.name: panel.title for panel in PANELS}
    for name, filename in report["plots"].items():
        if name == "overview":
            continue
        lines += [f"### {titles.get(name, name)}", "", f"![{name}]({filename})", ""]
    if report["missing_panels"]:
        lines += ["Not logged in this run: " + ", ".join(report["missing_panels"]) + ".", ""]
    if report["warnings"]:
        lines += ["## Notes", ""] + [f"- {w}" for w in report["warnings"]] + [""]
    return "\n".join(lines).rstrip() + "\n"


def expect_section(result: dict) -> list[str]:
    """The contract table of `rlrecipes expect` (its as_dict()), as Markdown lines."""
    from rlrecipes.after.expect import TABLE_HEADER
    from rlrecipes.after.verdict import cost_phrase

    outcome, cost = result["outcome"], result["cost"]
    counts = outcome["counts"]
    cost_text = cost_phrase(cost["status"], result["strict"], result.get("gpu"), result.get("reference_gpus", ()))
    lines = [f"{result['recipe']} on `{result['profile']}`: **{result['status'].upper()}** -- outcome "
             f"{outcome['status']} ({counts['met']} met, {counts['missed']} missed, {counts['not measured']} not "
             f"measured); cost {cost_text}", ""]
    rows = [[c["name"], f"`{c['metric']}`" if c["metric"] != "-" else "-", c["expected"], c["value"],
             f"**{c['status']}**" if c["status"] == "missed" else c["status"], c["detail"]] for c in result["checks"]]
    return lines + _md_table(TABLE_HEADER, rows)


HTML_STYLE = ("body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em}"
              "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 10px;"
              "text-align:left}img{max-width:100%}code{background:#f4f4f4}")


def render_html(report: dict, plot_dir: Path) -> str:
    """report.md rendered by markdown-it-py (CommonMark + tables), plots embedded so the file stands alone.

    Raw HTML in the Markdown is escaped, not passed through (`html: False`): metric names, paths and
    warnings come from the run's files.
    """
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(render_markdown(report))
    for token in tokens:
        for child in token.children or []:
            if child.type == "image":
                src = str(child.attrGet("src") or "")
                if src in report["plots"].values():  # our own PNGs, by file name
                    data = base64.b64encode((plot_dir / src).read_bytes()).decode("ascii")
                    child.attrSet("src", f"data:image/png;base64,{data}")
    body = md.renderer.render(tokens, md.options, {})
    return ("<!doctype html><html><head><meta charset='utf-8'>\n"
            f"<title>{html.escape(report['title'])}</title>\n<style>{HTML_STYLE}</style></head><body>\n"
            f"{body}</body></html>\n")


REPORT_FILES = ("report.md", "report.html", "summary.json")


def check_report_dir(out: Path) -> None:
    """Refuse an --out that is not a report folder: the report set replaces its folder as a whole, so the
    folder must be new, empty, or hold only what an earlier report wrote (these files and its plots)."""
    import os

    from rlrecipes.errors import RecipeError

    if not os.path.lexists(out):
        return
    if not out.is_dir():
        raise RecipeError("--out exists and is not a directory", where=str(out), hint="pick another --out")
    ours = set(REPORT_FILES) | {f"{panel.name}.png" for panel in PANELS} | {"overview.png"}
    foreign = sorted(p.name for p in out.iterdir() if p.name not in ours)
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise RecipeError(f"--out holds {shown}, which a report does not write: the report replaces its folder "
                          "as a whole", where=str(out), hint="pick a new or empty --out, or one an earlier report "
                                                             "wrote")


def write_report(report: dict, out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"md": out_dir / "report.md", "html": out_dir / "report.html", "json": out_dir / "summary.json"}
    # 0644: a report is for reading, often by another user than the container's root that wrote it
    atomic_write_text(paths["md"], render_markdown(report), mode=0o644)
    atomic_write_text(paths["html"], render_html(report, out_dir), mode=0o644)
    atomic_write_text(paths["json"], json.dumps(report, indent=2, sort_keys=True) + "\n", mode=0o644)
    return paths

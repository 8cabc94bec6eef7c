"""PNG plots of a run's metrics (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path

from rlrecipes.fsutil import atomic_path
from rlrecipes.verl.run_metrics import RunMetrics


@dataclass(frozen=True)
class Panel:
    name: str  # file stem
    title: str
    patterns: tuple[str, ...]  # metric names or fnmatch patterns, in legend order
    ylabel: str = ""


PANELS: tuple[Panel, ...] = (
    Panel("reward", "Reward (training batch)", ("critic/score/mean", "critic/rewards/mean"), "mean"),
    Panel("val_accuracy", "Validation accuracy", ("val-core/*mean@*", "val/test_score/*"), "accuracy"),
    Panel("kl", "KL to the reference policy", ("actor/kl_loss", "actor/ppo_kl", "critic/kl"), "KL"),
    Panel("grad_norm", "Gradient norm", ("actor/grad_norm", "critic/grad_norm"), "norm"),
    Panel("entropy", "Policy entropy", ("actor/entropy", "actor/entropy_loss"), "nats/token"),
    Panel("response_length", "Response length", ("response_length/mean", "response_length/max"), "tokens"),
    Panel("step_time", "Seconds per step and its phases", ("timing_s/step", "timing_s/*"), "seconds"),
    Panel("throughput", "Throughput", ("perf/throughput",), "tokens/s per GPU"),
    Panel("gpu_memory", "GPU memory", ("perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb"), "GiB"),
)


REFERENCE_PANEL = "val_accuracy"  # where a recipe's reference curve (rlrecipes.reference) is drawn


def panel_keys(panel: Panel, keys: list[str]) -> list[str]:
    """The run's metrics a panel shows, in the panel's pattern order, each once."""
    chosen: list[str] = []
    for pattern in panel.patterns:
        for key in sorted(keys):
            if fnmatch.fnmatchcase(key, pattern) and key not in chosen:
                chosen.append(key)
    return chosen


def _draw(ax, run: RunMetrics, panel: Panel, keys: list[str], reference=None) -> None:
    from matplotlib.ticker import MaxNLocator

    for key in keys:
        xs, ys = run.series(key)
        style = "-o" if len(xs) <= 30 else "-"
        ax.plot(xs, ys, style, markersize=3, linewidth=1.4, label=key)
    if reference is not None and panel.name == REFERENCE_PANEL:
        xs, ys = zip(*reference.points)
        # two published points are a start and an end, not a curve: markers alone
        ax.plot(xs, ys, "--s" if len(xs) > 2 else "s", color="grey", markersize=3, linewidth=1.0, alpha=0.8,
                label=f"reference: {reference.key}")
    for step in run.restarts:
        ax.axvline(step, color="grey", linestyle="--", linewidth=0.8)
    ax.set_title(panel.title, fontsize=10)
    ax.set_xlabel("step", fontsize=8)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole: no tick at 2.5
    if panel.ylabel:
        ax.set_ylabel(panel.ylabel, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, loc="best")


def write_plots(run: RunMetrics, out_dir: Path, reference=None) -> tuple[dict[str, Path], list[str]]:
    """One PNG per panel with data, plus overview.png; returns ({panel: path}, [panels without data]).
    `reference` (a ReferenceCurve) is drawn in the validation-accuracy panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    missing: list[str] = []
    drawable: list[tuple[Panel, list[str]]] = []
    for panel in PANELS:
        keys = [k for k in panel_keys(panel, run.keys) if run.has(k)]
        if not keys:
            missing.append(panel.name)
            continue
        drawable.append((panel, keys))
        fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=110)
        _draw(ax, run, panel, keys, reference)
        fig.tight_layout()
        path = out_dir / f"{panel.name}.png"
        with atomic_path(path, suffix=".png") as tmp:
            fig.savefig(tmp, format="png")
            os.chmod(tmp, 0o644)
        plt.close(fig)
        written[panel.name] = path
    if drawable:
        cols = 3
        rows = (len(drawable) + cols - 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(5.0 * cols, 3.2 * rows), dpi=100, squeeze=False)
        for ax, (panel, keys) in zip(axes.flat, drawable):
            _draw(ax, run, panel, keys, reference)
        for ax in list(axes.flat)[len(drawable):]:
            ax.axis("off")
        fig.tight_layout()
        path = out_dir / "overview.png"
        with atomic_path(path, suffix=".png") as tmp:
            fig.savefig(tmp, format="png")
            os.chmod(tmp, 0o644)
        plt.close(fig)
        written["overview"] = path
    return written, missing

"""A launch's start-up read from its console log (rlrecipes/verl/startup.py), in `rlrecipes report` and in the
start-up table of docs/bench/gpu-overhead.md: the phases of a recorded launch whose figures the docs quote, a
log whose clock disagrees with its launch stamp, an older verl that prints only Ray's line, and the docs' table
as the script prints it from the raw data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rlrecipes.cli import main
from rlrecipes.verl.startup import read_startup, run_startups

REPO = Path(__file__).resolve().parents[2]
RECORDS = REPO / "docs" / "bench" / "gpu-data"
FILLED = RECORDS / "recovery-faults-hopper-3" / "logs"


def test_a_recorded_launch_reads_phase_by_phase():
    startup = read_startup(FILLED / "console-20261204T191215Z.log")
    assert startup.from_launch
    assert [(p.key, round(p.seconds, 1)) for p in startup.phases] == [
        ("ray", 46.7), ("datasets", 70.3), ("models", 42.8), ("rollout", 208.3), ("ready", 0.2)]
    assert round(startup.total_s, 1) == 368.3 and startup.reached == "ready"


def test_the_launches_of_a_run_come_in_launch_order_from_their_metrics_files():
    startups = run_startups(sorted(FILLED.glob("metrics-*.jsonl"), reverse=True))
    assert [s.log.name for s in startups] == ["console-20261204T191215Z.log", "console-20261204T192148Z.log"]
    assert round(startups[1].total_s, 1) == 295.7


def console(tmp_path: Path, stamp: str, *lines: str) -> Path:
    log = tmp_path / f"console-{stamp}.log"
    log.write_text("\n".join(lines) + "\n")
    return log


def test_a_log_whose_clock_disagrees_with_its_stamp_is_read_from_ray_on(tmp_path):
    # the container's clock two hours off the launcher's UTC stamp
    log = console(tmp_path, "20261204T100000Z",
                  "2026-12-04 12:00:30,000\tINFO worker.py:2024 -- Started a local Ray instance.",
                  "(TaskRunnerV1 pid=1) INFO:2026-12-04 12:01:00,500:train and validate dataloader initialized, ...",
                  "(TaskRunnerV1 pid=1) INFO:2026-12-04 12:01:10,500:all initialize finished, ready to fit")
    startup = read_startup(log)
    assert not startup.from_launch
    assert [(p.key, p.seconds) for p in startup.phases] == [("datasets", 30.5), ("ready", 10.0)]


def test_an_older_verl_has_ray_alone_and_a_log_without_milestones_has_none(tmp_path):
    old = console(tmp_path, "20261202T155731Z",
                  "2026-12-02 15:57:46,200\tINFO worker.py:1951 -- Started a local Ray instance.",
                  "(TaskRunner pid=9) step:1 - critic/score/mean:0.1")
    assert [(p.key, p.seconds) for p in read_startup(old).phases] == [("ray", 15.2)]
    assert read_startup(console(tmp_path, "20261202T160000Z", "step:1 - critic/score/mean:0.1")) is None


def test_a_garbled_time_is_no_milestone_and_a_garbled_stamp_no_launch(tmp_path):
    log = console(tmp_path, "20261399T000000Z",
                  "2026-12-04 12:00:30,000\tINFO worker.py:2024 -- Started a local Ray instance.",
                  "(TaskRunnerV1 pid=1) INFO:2026-12-04 25:61:00,500:train and validate dataloader initialized, ...",
                  "(TaskRunnerV1 pid=1) INFO:2026-12-04 12:01:10,500:all initialize finished, ready to fit")
    startup = read_startup(log)
    assert not startup.from_launch and [(p.key, p.seconds) for p in startup.phases] == [("ready", 40.5)]


def test_the_report_shows_each_launchs_start_up(tmp_path):
    out = tmp_path / "report"
    assert main(["report", str(FILLED), "--out", str(out)]) == 0
    text = (out / "report.md").read_text()
    section = text[text.index("## Start-up"):text.index("## Plots")]
    assert "| rollout: rollout engine (vLLM: weights, compile, CUDA graphs) and weight sync | 3m 28s | 2m 11s |" \
        in section
    assert "| **launch to ready to fit** | **6m 08s** | **4m 56s** |" in section


def test_the_overhead_record_holds_the_table_the_script_prints():
    printed = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu" / "startup_table.py")],
                             capture_output=True, text=True, check=True).stdout
    assert printed.count("\n") >= 12
    assert printed in (REPO / "docs" / "bench" / "gpu-overhead.md").read_text()


@pytest.mark.parametrize("quoted", ["| launch to ready to fit | 6 min 8 s | 4 min 56 s |",
                                    "| rollout engine (vLLM: weights, compile, CUDA graphs) and weight sync | "
                                    "3 min 28 s | 2 min 11 s |"])
def test_the_reliability_record_quotes_the_same_start_up(quoted):
    assert quoted in (REPO / "docs" / "bench" / "gpu-reliability.md").read_text()


def test_the_ranges_the_docs_quote_are_the_recorded_launches():
    """docs/bench/gpu-overhead.md and docs/benchmarks.md quote the start-up's range and its rollout phase's: both
    come from the recorded console logs, not typed twice."""
    whole = [s for s in map(read_startup, sorted(RECORDS.rglob("console-*.log"))) if s is not None and s.complete]
    totals = [s.total_s for s in whole]
    rollout = [p.seconds for s in whole for p in s.phases if p.key == "rollout"]
    quoted = (f"{min(totals):.0f}-{max(totals):.0f} s", f"{min(rollout):.0f}-{max(rollout):.0f} s")
    assert quoted == ("129-368 s", "65-208 s")
    for doc in (REPO / "docs" / "bench" / "gpu-overhead.md", REPO / "docs" / "benchmarks.md"):
        text = " ".join(doc.read_text().split())
        assert all(q in text for q in quoted), doc


CPU_RECORD = REPO / "docs" / "bench" / "cpu-data" / "startup-cpu"


def test_the_cpu_side_table_and_its_ranges_are_the_recorded_launches():
    """docs/bench/gpu-overhead.md's CPU-host table (benchmarks/startup_cpu.sh) is read from its console logs, and
    the ranges its text quotes are that table's."""
    doc = (REPO / "docs" / "bench" / "gpu-overhead.md").read_text()
    table = doc.split("<!-- cpu-startup-table -->")[1].split("<!-- /cpu-startup-table -->")[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.strip().splitlines()[2:]]
    phases: dict[str, list[tuple[float, float, float]]] = {}
    for lever_cell, run, ray, datasets, total in rows:
        lever = lever_cell.split("`")[1] if "`" in lever_cell else lever_cell
        log = next((CPU_RECORD / f"{lever}-{run}").glob("*/console-*.log"))
        startup = read_startup(log)
        read = {p.key: p.seconds for p in startup.phases}
        assert (ray, datasets, total) == (f"{read['ray']:.1f}", f"{read['datasets']:.1f}",
                                          f"{startup.total_s:.1f}"), log
        phases.setdefault(lever, []).append((read["ray"], read["datasets"], startup.total_s))
    assert sorted(phases) == ["nodash", "nodash-tq1", "shipped", "tq1"] and all(len(v) == 2 for v in phases.values())

    def span(lever: str, i: int) -> str:
        values = [round(v[i], 1) for v in phases[lever]]
        return f"{min(values):.1f}-{max(values):.1f} s"

    for quoted in (f"took {span('tq1', 1)} instead of {span('shipped', 1).removesuffix(' s')}",
                   f"Without it: {span('nodash', 0)} against {span('shipped', 0)}",
                   f"{span('nodash-tq1', 2)} from launch to the datasets against {span('shipped', 2)}"):
        assert quoted in " ".join(doc.split()), quoted
    summary = (REPO / "docs" / "benchmarks.md").read_text()  # its summary row quotes the same figures
    for quoted in (f"shipped {span('shipped', 2)}", f"{span('tq1', 1)} against {span('shipped', 1)}",
                   f"{span('nodash', 0)} against {span('shipped', 0)}", f"both: {span('nodash-tq1', 2)}"):
        assert quoted in summary, quoted

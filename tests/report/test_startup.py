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
from rlrecipes.verl.startup import console_logs, open_log, read_startup, run_startups

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


def test_a_run_whose_console_logs_were_gzipped_keeps_its_start_ups(tmp_path):
    import gzip
    import shutil

    for metrics in FILLED.glob("metrics-*.jsonl"):
        shutil.copy(metrics, tmp_path / metrics.name)
        console = FILLED / ("console-" + metrics.name.removeprefix("metrics-").removesuffix(".jsonl") + ".log")
        with open(console, "rb") as src, gzip.open(tmp_path / (console.name + ".gz"), "wb") as dst:
            shutil.copyfileobj(src, dst)
    startups = run_startups(sorted(tmp_path.glob("metrics-*.jsonl")))
    assert [s.log.name for s in startups] == ["console-20261204T191215Z.log.gz", "console-20261204T192148Z.log.gz"]
    assert [round(s.total_s, 1) for s in startups] == [368.3, 295.7] and all(s.complete for s in startups)


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


def test_a_gzipped_log_reads_as_it_is_and_a_log_without_a_stamp_from_ray_on(tmp_path):
    import gzip

    lines = ["2026-12-04 10:00:30,000\tINFO worker.py:2024 -- Started a local Ray instance.",
             "(TaskRunnerV1 pid=1) INFO:2026-12-04 10:01:00,500:train and validate dataloader initialized, ...",
             "(TaskRunnerV1 pid=1) INFO:2026-12-04 10:01:10,500:all initialize finished, ready to fit"]
    stamped = tmp_path / "console-20261204T100000Z.log.gz"
    unstamped = tmp_path / "verl-console.log.gz"
    for path in (stamped, unstamped):
        with gzip.open(path, "wt") as f:
            f.write("\n".join(lines) + "\n")
    whole = read_startup(stamped)
    assert whole.complete and [(p.key, p.seconds) for p in whole.phases] == [
        ("ray", 30.0), ("datasets", 30.5), ("ready", 10.0)]
    assert whole.ray_to_ready_s == 40.5
    from_ray = read_startup(unstamped)
    assert not from_ray.complete and from_ray.start == "ray"
    assert [(p.key, p.seconds) for p in from_ray.phases] == [("datasets", 30.5), ("ready", 10.0)]
    assert from_ray.ray_to_ready_s == 40.5
    # without Ray's line there is no "from Ray": the phases start at the datasets
    no_ray = console(tmp_path, "x", *lines[1:])
    assert read_startup(no_ray).start == "datasets" and read_startup(no_ray).ray_to_ready_s is None
    assert console_logs(tmp_path) == sorted([stamped, unstamped, no_ray])


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


NOCOMPILE = RECORDS / "startup-levers-h100-8" / "levers" / "nocompile" / "console-20261207T225058Z.log"


def test_each_vllm_engines_own_start_is_read_where_vllm_logged_at_info():
    """vLLM's INFO lines inside the rollout phase: a cold launch with torch.compile, one without it (no compilation
    part in vLLM's line), and a launch at verl's default WARN, which prints none of them."""
    from rlrecipes.verl.startup import EngineInit

    cold = read_startup(RECORDS / "startup-levers-h100-2" / "levers" / "shipped-cold" / "console-20261205T165157Z.log")
    assert cold.engines == [EngineInit("3422", init_s=36.63, compile_s=13.05, graphs_s=12.0, load_s=0.212026)]
    assert read_startup(NOCOMPILE).engines == [
        EngineInit("3718", init_s=18.94, compile_s=None, graphs_s=8.0, load_s=0.171325)]
    assert read_startup(FILLED / "console-20261204T191215Z.log").engines == []


def test_two_engines_are_told_apart_and_a_later_capture_is_not_their_start(tmp_path):
    server = "\x1b[36m(vLLMHttpServer pid={})\x1b[0m (EngineCore pid=9) INFO 12-07 12:00:{:02d} [x.py:1] {}"
    log = console(tmp_path, "20261204T120000Z",
                  "2026-12-04 12:00:30,000\tINFO worker.py:2024 -- Started a local Ray instance.",
                  server.format(11, 40, "Model loading took 0.01 GiB memory and 0.5 seconds"),
                  server.format(12, 41, "Model loading took 0.01 GiB memory and 0.7 seconds"),
                  server.format(11, 45, "Graph capturing finished in 3 secs, took 0.15 GiB"),
                  server.format(11, 46, "init engine (profile, create kv cache, warmup model) took 9.21 s "
                                        "(compilation: 3.49 s)"),
                  server.format(12, 50, "init engine (profile, create kv cache, warmup model) took 2.28 s"),
                  server.format(11, 55, "Graph capturing finished in 7 secs, took 0.15 GiB"),
                  "(TaskRunnerV1 pid=1) INFO:2026-12-04 12:01:10,500:all initialize finished, ready to fit")
    engines = read_startup(log).engines
    assert [(e.server, e.init_s, e.compile_s, e.graphs_s, e.load_s) for e in engines] == [
        ("11", 9.21, 3.49, 3.0, 0.5), ("12", 2.28, None, None, 0.7)]


def test_an_older_vllms_engine_lines_are_read_too(tmp_path):
    """vLLM 0.11 (the A100 image's): "took <s> seconds" and torch.compile's total on a line of its own
    (vllm/compilation/monitor.py, `end_monitoring_torch_compile`)."""
    server = "(vLLMHttpServer pid=5) (EngineCore_DP0 pid=6) INFO 12-04 12:00:{:02d} [x.py:1] {}"
    log = console(tmp_path, "20261204T120000Z",
                  "2026-12-04 12:00:30,000\tINFO worker.py:2024 -- Started a local Ray instance.",
                  server.format(40, "Model loading took 5.79 GiB memory and 2.104 seconds"),
                  server.format(50, "torch.compile takes 14.52 s in total"),
                  server.format(58, "Graph capturing finished in 12 secs, took 0.51 GiB"),
                  server.format(59, "init engine (profile, create kv cache, warmup model) took 33.27 seconds"),
                  "(TaskRunner pid=1) INFO:2026-12-04 12:01:10,500:all initialize finished, ready to fit")
    [engine] = read_startup(log).engines
    assert (engine.init_s, engine.compile_s, engine.graphs_s, engine.load_s) == (33.27, 14.52, 12.0, 2.104)


def test_the_report_shows_each_engines_own_start(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for f in NOCOMPILE.parent.iterdir():
        (run / f.name).write_bytes(f.read_bytes())
    out = tmp_path / "report"
    assert main(["report", str(run), "--out", str(out)]) == 0
    text = (out / "report.md").read_text()
    section = text[text.index("## Start-up"):text.index("## Plots")]
    assert "| rollout: rollout engine (vLLM: weights, compile, CUDA graphs) and weight sync | 1m 20s |" in section
    assert "| of it, vLLM's engine init (torch.compile; CUDA graphs) | 19s (none; 8s) |" in section
    # a launch at WARN: no such row
    out2 = tmp_path / "report2"
    assert main(["report", str(FILLED), "--out", str(out2)]) == 0
    assert "vLLM's engine init" not in (out2 / "report.md").read_text()


def test_the_overhead_record_holds_the_engine_table_the_script_prints():
    printed = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu" / "startup_table.py"), "--engines"],
                             capture_output=True, text=True, check=True).stdout
    text = (REPO / "docs" / "bench" / "gpu-overhead.md").read_text()
    assert text.split("<!-- engine-init-table -->\n")[1].split("<!--")[0] == printed
    assert "| `startup-levers-h100-8/levers/nocompile/console-20261207T225058Z.log` | 18.94 | - | 8 | 0.17 |" in printed


def test_the_overhead_record_holds_the_table_the_script_prints():
    printed = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu" / "startup_table.py")],
                             capture_output=True, text=True, check=True).stdout
    assert printed.count("\n") >= 12
    assert printed in (REPO / "docs" / "bench" / "gpu-overhead.md").read_text()


@pytest.mark.parametrize("bad", [["--engine"], ["README.md"], ["--engines", "no-such-folder"]])
def test_the_table_script_refuses_a_misspelled_option_or_a_records_folder_that_is_not_one(bad):
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu" / "startup_table.py"), *bad],
                          capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr, done.stderr
    assert ("unrecognized arguments: --engine" if bad == ["--engine"] else "not a folder of records") in done.stderr


@pytest.mark.parametrize("quoted", ["| launch to ready to fit | 6 min 8 s | 4 min 56 s |",
                                    "| rollout engine (vLLM: weights, compile, CUDA graphs) and weight sync | "
                                    "3 min 28 s | 2 min 11 s |"])
def test_the_reliability_record_quotes_the_same_start_up(quoted):
    assert quoted in (REPO / "docs" / "bench" / "gpu-reliability.md").read_text()


def phase(group, key) -> list[float]:
    """The seconds of phase `key` in each launch of `group` that has it."""
    return [p.seconds for s in group for p in s.phases if p.key == key]


def test_the_ranges_the_docs_quote_are_the_recorded_launches():
    """docs/bench/gpu-overhead.md and docs/benchmarks.md quote the start-up's range and its rollout phase's: both
    come from the recorded console logs, not typed twice."""
    # the GRPO canary's launches and the flagship's and smoke runs' (the PPO canary's one launch is its own row of
    # the table, and its recipe's start-up reference: tests/after/test_expect_ppo_hopper_record.py)
    startups = [s for s in map(read_startup, console_logs(RECORDS))
                if s is not None and "canary-ppo" not in s.log.parts]
    # "before any lever": every launch without `uni`, the one lever on record that shortens the start-up -- its own
    # launch (quoted with the third lever sitting, tests/report/test_levers_record.py) and the launches with the
    # Hopper profile as shipped since, which carries it (verl prints its config in the console log)
    def with_uni(startup) -> bool:
        with open_log(startup.log, "rt") as log:
            return "'distributed_executor_backend': 'uni'" in log.read()

    uni = [s for s in startups if s.complete and with_uni(s)]
    whole = [s for s in startups if s.complete and not with_uni(s)]
    assert sorted(str(s.log.relative_to(RECORDS)).split("/")[0] for s in uni) == [
        "canary-seeds-hopper-h100", "canary-seeds-hopper-h100-2", "canary-seeds-hopper-h100-2",
        "canary-seeds-ppo-hopper-h100-3", "recovery-faults-hopper-4", "recovery-faults-hopper-4",
        "recovery-faults-hopper-5", "recovery-faults-hopper-5", "recovery-faults-hopper-6", "recovery-faults-hopper-6",
        "startup-levers-h100-3", "startup-levers-h100-4",
        "startup-levers-h100-5", "startup-levers-h100-5", "startup-levers-h100-6", "startup-levers-h100-7",
        "startup-levers-h100-7", "startup-levers-h100-7", "startup-levers-h100-8", "startup-levers-h200",
        "startup-levers-h200", "startup-levers-h200"]
    # each recovery sitting's run: its first launch (cold host), then the same command's relaunch on that host
    runs: dict[Path, list] = {}
    for s in sorted((s for s in uni if s.log.parent.name == "logs"), key=lambda s: s.log.name):
        runs.setdefault(s.log.parent, []).append(s)
    assert [len(launches) for launches in runs.values()] == [2, 2, 2]
    firsts, relaunches = [r[0] for r in runs.values()], [r[1] for r in runs.values()]
    # the lever sittings' launches with the profile as shipped: each host's first (the fourth sitting's `timeline`,
    # the fifth's `shipped-cold` and, on its second host, `profile`, the sixth's `micro512`, the seventh's
    # `shipped-warm`), and the later launches on a warm host (the fifth's `profile`, cut short after "ready to fit";
    # the sixth's `shipped-warm` and `profile-stack`; the seventh's `profile-stack` and `rows-on-host`); `profile`
    # and `profile-stack` differ from the profile as shipped only in step 4's torch profiler, `micro512` in the
    # training passes' micro batches, `rows-on-host` in what the training passes copy to the GPU, none in what runs
    # before step 1
    def lever(sitting: str, name: str):
        return next(s for s in uni if s.log.parent.name == name and s.log.parts[-4] == sitting)

    def seed_launch(sitting: str, seed: str):
        return next(s for s in uni if s.log.parts[-5] == sitting and s.log.parts[-3] == seed)

    cold = [lever("startup-levers-h100-4", "timeline"), lever("startup-levers-h100-5", "shipped-cold"),
            lever("startup-levers-h100-6", "profile"), lever("startup-levers-h100-7", "micro512"),
            lever("startup-levers-h200", "shipped-warm"), *firsts,
            next(s for s in uni if s.log.parts[-5] == "canary-seeds-hopper-h100"),  # seed 1, the host's first
            seed_launch("canary-seeds-hopper-h100-2", "seed-1")]  # the host's first, alone on it
    # seed 2 again after its first start failed (the port taken), alone on the host seed 1 had run on
    warm = [*relaunches, seed_launch("canary-seeds-hopper-h100-2", "seed-2"), lever("startup-levers-h100-5", "profile"), lever("startup-levers-h100-7", "shipped-warm"),
            lever("startup-levers-h100-7", "profile-stack"), lever("startup-levers-h200", "profile-stack"),
            lever("startup-levers-h200", "rows-on-host")]
    # the GRPO canary's shuffled-reward control, started once PPO seed 0's engine was up on the same host: it
    # started beside a run stepping (and with the seed runner's KV-cache share), neither a host's first launch nor a
    # second one alone on it
    beside = [s for s in uni
              if s.log.parts[-6:-4] == ("canary-seeds-ppo-hopper-h100-3", "control-shuffled")]
    assert len(beside) == 1
    # the eighth sitting's `nocompile`, the host's first launch, with vLLM's engine built without torch.compile: a
    # lever, not the profile as shipped (its start-up is quoted in its own section)
    nocompile = [s for s in uni if s.log.parts[-4:-2] == ("startup-levers-h100-8", "levers")]
    assert [s.log.parent.name for s in nocompile] == ["nocompile"]
    # every launch with uni but the `uni` lever's own, the one started beside a run and `nocompile`
    assert len({s.log for s in cold + warm}) == len(uni) - 3
    cold_totals, cold_rollout = [s.total_s for s in cold], phase(cold, "rollout")
    warm_totals, warm_rollout = [s.total_s for s in warm], phase(warm, "rollout")
    shipped = (f"a host's first launch still took {min(cold_totals):.0f}-{max(cold_totals):.0f} s",
               f"the rollout engine {min(cold_rollout):.0f}-{max(cold_rollout):.0f} s of it",
               f"a second launch on that warm host {min(warm_totals):.0f}-{max(warm_totals):.0f} s "
               f"(rollout engine {min(warm_rollout):.0f}-{max(warm_rollout):.0f} s)")
    overhead = " ".join((REPO / "docs" / "bench" / "gpu-overhead.md").read_text().split())
    assert all(q in overhead for q in shipped), shipped
    totals = [s.total_s for s in whole]
    rollout = [p.seconds for s in whole for p in s.phases if p.key == "rollout"]
    quoted = (f"{min(totals):.0f}-{max(totals):.0f} s", f"{min(rollout):.0f}-{max(rollout):.0f} s")
    assert quoted == ("127-368 s", "59-208 s")
    for doc in (REPO / "docs" / "bench" / "gpu-overhead.md", REPO / "docs" / "benchmarks.md"):
        text = " ".join(doc.read_text().split())
        assert all(q in text for q in quoted), doc

    def span(values) -> str:
        values = [f"{v:.0f}" for v in values]  # as the table prints them
        return f"{min(values, key=float)}-{max(values, key=float)} s"

    flagship = [s for s in startups if s.log.parent.name.startswith("hopper-3b") or s.log.parent.name == "variant"]
    smoke = [s for s in startups if s.log.parent.name == "hopper" and s.reached == "ready"]
    recovery = [read_startup(log) for log in sorted((RECORDS / "recovery-hopper").glob("attempt-*.log"))]
    assert len(flagship) == 4 and len(smoke) == 4 and len(recovery) == 3
    assert all(not s.from_launch and s.start == "ray" for s in flagship + smoke + recovery)
    text = " ".join((REPO / "docs" / "bench" / "gpu-overhead.md").read_text().split())
    for q in (f"flagship's Ray to \"ready to fit\" took {span(s.ray_to_ready_s for s in flagship)}",
              f"Its rollout engine took {span(phase(flagship, 'rollout'))}, "
              f"its models {span(phase(flagship, 'models'))}",
              f"It took {span(phase(flagship, 'datasets'))} for the flagship's 256 + 64 rows and "
              f"{span(phase(smoke, 'datasets'))} for the smoke runs' 256 + 64 against "
              f"{span(phase(whole, 'datasets'))} for the canary's",
              f"the canary's took {span(phase(whole, 'ray'))}",
              f"they took {span(s.ray_to_ready_s for s in recovery)} from Ray"):
        assert q in text, q
    summary = " ".join((REPO / "docs" / "benchmarks.md").read_text().split())
    assert (f"{span(s.ray_to_ready_s for s in flagship)}; the rollout engine {span(phase(flagship, 'rollout'))} of it"
            in summary)


CPU_DATA = REPO / "docs" / "bench" / "cpu-data"
OVERHEAD = REPO / "docs" / "bench" / "gpu-overhead.md"
_LEVERS = {"shipped", "nodash", "tq1", "nodash-tq1"}


def _cpu_table(marker: str, record) -> dict[str, list[tuple[float, float, float]]]:
    """The rows of one of gpu-overhead.md's CPU-host tables, each held to its console log (`record(cells)`: the
    row's key, the folder of its launches and its lever); returns (ray, datasets, total) per key."""
    doc = OVERHEAD.read_text()
    table = doc.split(f"<!-- {marker} -->")[1].split(f"<!-- /{marker} -->")[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.strip().splitlines()[2:]]
    assert rows, marker
    phases: dict[str, list[tuple[float, float, float]]] = {}
    for cells in rows:
        key, folder, lever = record(cells)
        *_, run, ray, datasets, total = cells
        log = next((folder / f"{lever}-{run}").glob("*/console-*.log"))
        startup = read_startup(log)
        read = {p.key: p.seconds for p in startup.phases}
        assert (ray, datasets, total) == (f"{read['ray']:.1f}", f"{read['datasets']:.1f}",
                                          f"{startup.total_s:.1f}"), log
        phases.setdefault(key, []).append((read["ray"], read["datasets"], startup.total_s))
    return phases


def _lever(cell: str) -> str:
    lever = cell.split("`")[1] if "`" in cell else cell
    assert lever in _LEVERS, cell
    return lever


def _span(values) -> str:
    values = [round(v, 1) for v in values]
    return f"{min(values):.1f}-{max(values):.1f} s"


def test_the_cpu_side_table_and_its_ranges_are_the_recorded_launches():
    """docs/bench/gpu-overhead.md's CPU-host table (benchmarks/startup_cpu.sh) is read from its console logs, and
    the ranges its text quotes are that table's."""
    phases = _cpu_table("cpu-startup-table",
                        lambda c: (_lever(c[0]), CPU_DATA / "startup-cpu", _lever(c[0])))
    assert sorted(phases) == ["nodash", "nodash-tq1", "shipped", "tq1"] and all(len(v) == 2 for v in phases.values())

    def span(lever: str, i: int) -> str:
        return _span(v[i] for v in phases[lever])

    doc = " ".join(OVERHEAD.read_text().split())
    for quoted in (f"took {span('tq1', 1)} instead of {span('shipped', 1).removesuffix(' s')}",
                   f"Without it: {span('nodash', 0)} against {span('shipped', 0)}",
                   f"{span('nodash-tq1', 2)} from launch to the datasets against {span('shipped', 2)}"):
        assert quoted in doc, quoted
    summary = (REPO / "docs" / "benchmarks.md").read_text()  # its summary row quotes the same figures
    for quoted in (f"shipped {span('shipped', 2)}", f"{span('tq1', 1)} against {span('shipped', 1)}",
                   f"{span('nodash', 0)} against {span('shipped', 0)}", f"both: {span('nodash-tq1', 2)}"):
        assert quoted in summary, quoted


def test_the_hopper_set_table_and_its_ranges_are_the_recorded_launches():
    """The same benchmark in the Hopper image's own Python set (real vLLM, then the stand-in shadowing it): the
    table is read from its console logs, and what the text and the summary row quote is that table's."""
    folders = {"vLLM 0.24.0": "real", "stand-in": "standin"}
    phases = _cpu_table("cpu-startup-table-hopper-env", lambda c: (
        f"{folders[c[0]]}/{_lever(c[1])}", CPU_DATA / "startup-cpu-hopper-env" / folders[c[0]], _lever(c[1])))
    assert sorted(phases) == ["real/nodash", "real/nodash-tq1", "real/shipped", "real/tq1",
                              "standin/nodash-tq1", "standin/shipped"] and all(len(v) == 2 for v in phases.values())

    def span(key: str, i: int) -> str:
        return _span(v[i] for v in phases[key])

    doc = " ".join(OVERHEAD.read_text().split())
    summary = (REPO / "docs" / "benchmarks.md").read_text()
    quotes = {
        doc: [f"As the image ships, {span('real/shipped', 2)} from launch to the datasets; with both levers "
              f"{span('real/nodash-tq1', 2)}",
              f"datasets phase to {_span([v[1] for lever in ('real/tq1', 'real/nodash-tq1') for v in phases[lever]])}"
              f" from {span('real/shipped', 1)}",
              f"launch to Ray to {_span([v[0] for lever in ('real/nodash', 'real/nodash-tq1') for v in phases[lever]])}"
              f" from {span('real/shipped', 0)}",
              f"{span('real/shipped', 2)} against {span('standin/shipped', 2)}",
              f"launch to Ray {span('real/shipped', 0)} against {span('standin/shipped', 0)}",
              f"the datasets phase {span('real/shipped', 1)} against {span('standin/shipped', 1)}",
              f"with one unit, {span('real/nodash-tq1', 1)} against {span('standin/nodash-tq1', 1)}",
              f"stand-in, shipped: {span('standin/shipped', 2)} against"],
        summary: [f"shipped {span('real/shipped', 2)}; both levers: {span('real/nodash-tq1', 2)}",
                  f"stand-in in the same set, shipped: {span('standin/shipped', 2)}"],
    }
    for text, quoted in quotes.items():
        for q in quoted:
            assert q in text, q
    # the import probes the text quotes are the recorded output of benchmarks/startup_cpu/imports.py
    probes = {}
    for name in ("real", "standin"):
        for line in (CPU_DATA / "startup-cpu-hopper-env" / f"imports-{name}.txt").read_text().splitlines()[1:]:
            label, rest = line.split(": median ")
            probes[name, label] = rest.split(" s ")[0]
    rollout = "driver: vLLM rollout utils (validate_config's LoRA rank check)"
    for q in (f"took {probes['real', rollout]} s (median of 3) with vLLM and {probes['standin', rollout]} s with the",
              f"(`vllm.config.lora`) took "
              f"{probes['real', 'driver: vLLM' + chr(39) + 's rank list alone (vllm.config.lora)']} s",
              f"median {probes['real', 'storage actor: transfer_queue.storage.simple_storage']} s"):
        assert q in doc, q


def test_the_cold_and_warm_sitting_is_quoted_from_its_records():
    """docs/bench/gpu-overhead.md's "Cold and warm on one host": every figure of its table and of its step findings
    read from the two launches' console logs and metrics (docs/bench/gpu-data/startup-levers-h100/)."""
    from support.scripts import script_module

    levers_table = script_module("benchmarks/gpu/levers_table.py")  # the levers' step timings, as that table reads them
    levers = RECORDS / "startup-levers-h100" / "levers"
    text = " ".join(OVERHEAD.read_text().split())
    startups, steps = {}, {}  # per lever: its start-up; {step: {phase: seconds}} from timing_s/
    for lever, label in (("shipped-cold", "the host's first"), ("shipped-warm", "the same command again")):
        startup = read_startup(next((levers / lever).glob("console-*.log")))
        assert startup is not None and startup.complete and startup.from_launch
        timing = levers_table.timings(levers / lever)
        assert sorted(timing) == [1, 2, 3, 4]
        startups[lever], steps[lever] = startup, timing
        phases = " | ".join(f"{p.seconds:.0f}" for p in startup.phases if p.key != "ready")
        later = [timing[n]["step"] for n in (2, 3, 4)]
        row = (f"| `{lever}`, {label} | {phases} | {startup.total_s:.0f} s | {timing[1]['step']:.1f} s | "
               f"{startup.total_s + timing[1]['step']:.0f} s | {min(later):.1f}-{max(later):.1f} s |")
        assert row in text, row

    def span(values, digits=1):
        values = list(values)
        return f"{min(values):.{digits}f}-{max(values):.{digits}f}"

    def later(key):  # a phase over steps 2-4 of both launches
        return [t[key] for timing in steps.values() for n, t in timing.items() if n >= 2]

    def outside(first: bool):  # a step's seconds outside every phase timer, in step 1 or in steps 2-4
        return [levers_table.outside_timers(t) for timing in steps.values() for n, t in timing.items()
                if (n == 1) == first]

    step1 = [timing[1]["step"] for timing in steps.values()]
    to_end_of_step1 = [startups[lever].total_s + steps[lever][1]["step"] for lever in steps]
    for quoted in (f"Step 1 took {span(step1)} s against {span(later('step'))} s for the steps after it",
                   f"{span(outside(True))} s of it lies outside every phase timer verl logs "
                   f"({span(outside(False))} s in steps 2-4)",
                   f"{span(to_end_of_step1, 0)} s from launch to the end of step 1",
                   f"{span(later('step'))} s, generation {span(later('gen'))} s, old log-probs "
                   f"{span(later('old_log_prob'))} s, reference {span(later('ref'))} s, update "
                   f"{span(later('update_actor'))} s, weight sync {span(later('update_weights'), 2)} s"):
        assert quoted in text, quoted
    summary = " ".join((REPO / "docs" / "benchmarks.md").read_text().split())
    cold, warm = startups["shipped-cold"], startups["shipped-warm"]
    for quoted in (f"{cold.total_s:.0f} s, then {warm.total_s:.0f} s to \"ready to fit\"",
                   f"step 1 {span(step1)} s, {span(outside(True))} s of it",
                   f"{span(to_end_of_step1, 0)} s launch to the end of step 1",
                   f"steady steps {span(later('step'))} s"):
        assert quoted in summary, quoted

"""benchmarks/gpu/torch_trace.py on a trace torch's profiler wrote as verl's torch profiler writes one
(`verl/utils/profiler/torch_profile.py`: `record_function` stage markers, `export_chrome_trace` to `*.json.gz`), in
the verl 0.9.1 environment: the stage is found by its marker, its outermost operators are counted once (aten::mm
inside aten::matmul is not counted again), and Python time between operators is what is left of the wall."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

from support.scripts import script_module

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu" / "torch_trace.py"

TRACE = textwrap.dedent("""
    import sys, time, torch
    from torch.profiler import ProfilerActivity, profile, record_function
    x = torch.randn(128, 128)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function("actor_compute_log_prob"):
            for _ in range(5):
                y = x @ x
            torch.softmax(y, dim=-1)
            time.sleep(0.2)
        with record_function("actor_update"):
            (x * 2).sum()
    prof.export_chrome_trace(sys.argv[1])
""")


def test_stages_their_outermost_operators_and_the_python_between(verl_python, tmp_path):
    trace = tmp_path / "actor_step4.json.gz"
    proc = subprocess.run([str(verl_python("0.9.1")), "-c", TRACE, str(trace)], capture_output=True, text=True,
                          timeout=180, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 0, proc.stderr[-2000:]
    module = script_module("benchmarks/gpu/torch_trace.py")
    rows = {r["stage"]: r for r in module.stages(module.load(trace))}
    assert set(rows) == {"actor_compute_log_prob", "actor_update"}
    log_prob = rows["actor_compute_log_prob"]
    ops = {op["op"]: op for op in log_prob["top"]}
    assert ops["aten::matmul"]["calls"] == 5 and "aten::mm" not in ops  # nested inside matmul
    assert ops["aten::softmax"]["calls"] == 1
    assert log_prob["wall_s"] >= 0.2 and log_prob["outside_ops_s"] >= 0.2 > log_prob["cpu_ops_s"]
    assert log_prob["gpu_s"] == 0
    update_ops = {op["op"] for op in rows["actor_update"]["top"]}
    assert {"aten::mul", "aten::sum"} <= update_ops
    printed = subprocess.run(["python3", str(SCRIPT), str(trace)], capture_output=True, text=True, check=True).stdout
    assert printed.startswith("actor_compute_log_prob: ") and "5 x  aten::matmul" in printed
    # the sleep is the stage's longest stretch without an operator: after the softmax, to the stage's end
    gap = log_prob["gaps"][0]
    assert (gap["after"], gap["before"]) == ("aten::softmax", "(end)") and gap["s"] >= 0.2
    assert gap["at_s"] + gap["s"] <= log_prob["wall_s"] + 1e-6 and len(log_prob["gaps"]) <= 2
    assert "longest without an operator: 0.2" in printed and "(after aten::softmax, before (end))" in printed


def test_the_slim_copy_keeps_the_stages_figures_and_the_window(verl_python, tmp_path):
    """`--slim` keeps the markers, the outermost operators and the GPU activity: the stages read back as from the
    full trace, the window names the main thread's top-level stages (not the nested ones) in order."""
    trace, slim = tmp_path / "actor_step4.json.gz", tmp_path / "slim.json.gz"
    proc = subprocess.run([str(verl_python("0.9.1")), "-c", TRACE, str(trace)], capture_output=True, text=True,
                          timeout=180, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 0, proc.stderr[-2000:]
    module = script_module("benchmarks/gpu/torch_trace.py")
    full = module.load(trace)
    printed = subprocess.run(["python3", str(SCRIPT), str(trace), "--slim", str(slim)], capture_output=True,
                             text=True, check=True).stdout
    kept = module.load(slim)
    assert len(kept) < len(full) and not any(e.get("name") == "aten::mm" for e in kept)  # inside matmul: dropped
    assert module.stages(kept) == module.stages(full)
    assert module.window(kept) == module.window(full)
    window = module.window(full)
    assert [w["stage"] for w in window["stages"]] == ["actor_compute_log_prob", "actor_update"]
    assert window["span_s"] >= window["stages_s"] >= 0.2
    assert printed.splitlines()[-1].startswith("window: ") and "actor_compute_log_prob 0." in printed.splitlines()[-1]
    assert not (tmp_path / "slim.json.gz.tmp").exists()


STACK_TRACE = textwrap.dedent("""
    import sys, torch
    from torch.profiler import ProfilerActivity, profile, record_function
    x = torch.randn(128, 128)
    def busy_python():
        total = 0
        for i in range(300000):
            total += i
        return total
    def micro_batch():
        y = x @ x
        busy_python()
        return torch.softmax(y, dim=-1)
    with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
        with record_function("actor_compute_log_prob"):
            for _ in range(2):
                micro_batch()
    prof.export_chrome_trace(sys.argv[1])
""")


def test_a_trace_with_python_stacks_names_the_python_between_operators(verl_python, tmp_path):
    """verl's `stack` content (torch's with_stack): the function that spends its time in Python, calling no
    operator, leads the stage's self times; the one that only calls operators does not, its operators' seconds
    being theirs; a trace without stacks has no such reading."""
    trace = tmp_path / "actor_step4.json.gz"
    proc = subprocess.run([str(verl_python("0.9.1")), "-c", STACK_TRACE, str(trace)], capture_output=True,
                          text=True, timeout=180, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 0, proc.stderr[-2000:]
    module = script_module("benchmarks/gpu/torch_trace.py")
    events = module.load(trace)
    (row,) = module.python_self(events)
    assert row["stage"] == "actor_compute_log_prob"
    first = row["top"][0]
    assert first["function"].endswith(": busy_python") and first["calls"] == 2, row["top"]
    fns = {fn["function"].rsplit(": ", 1)[-1]: fn for fn in row["top"]}
    assert fns["micro_batch"]["self_s"] < first["self_s"] / 5
    assert row["python_self_s"] <= row["wall_s"] and first["self_s"] <= row["python_self_s"]
    printed = subprocess.run(["python3", str(SCRIPT), str(trace), "--top", "3"], capture_output=True, text=True,
                             check=True).stdout
    assert "python actor_compute_log_prob: " in printed and ": busy_python" in printed
    # the slim copy keeps no Python events: the functions are read from the whole trace before it is written
    slimmed = subprocess.run(["python3", str(SCRIPT), str(trace), "--top", "3", "--slim", str(tmp_path / "s.json.gz")],
                             capture_output=True, text=True, check=True).stdout
    assert slimmed == printed
    assert not any(e.get("cat") == "python_function" for e in module.load(tmp_path / "s.json.gz"))
    without = [e for e in events if e.get("cat") != "python_function"]
    assert module.python_self(without) == []


def test_a_slim_copy_that_cannot_be_written_is_one_line_and_leaves_nothing(tmp_path):
    """OUT a folder: the error names it in one line, exit 2, and no temporary file is left beside it."""
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": [{"ph": "X", "cat": "user_annotation", "name": "actor_update", '
                     '"ts": 0, "dur": 10, "pid": 1, "tid": 1}]}')
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run(["python3", str(SCRIPT), str(trace), "--slim", str(out)], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and str(out) in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "t.json"] and not any(out.iterdir())


def test_a_file_without_trace_events_is_refused(tmp_path):
    bad = tmp_path / "t.json"
    bad.write_text("[]")
    proc = subprocess.run(["python3", str(SCRIPT), str(bad)], capture_output=True, text=True)
    assert proc.returncode == 2 and "not a chrome trace" in proc.stderr


def test_a_file_that_is_not_json_is_refused_naming_it(tmp_path):
    for name, data in (("t.json", b"not json"), ("t.json.gz", b"not gzip")):
        bad = tmp_path / name
        bad.write_bytes(data)
        proc = subprocess.run(["python3", str(SCRIPT), str(bad)], capture_output=True, text=True)
        assert proc.returncode == 2 and f"{bad}: not JSON" in proc.stderr and "Traceback" not in proc.stderr

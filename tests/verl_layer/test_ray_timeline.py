"""benchmarks/gpu/ray_timeline.py on a timeline Ray itself wrote: the verl 0.9.1 environment's Ray, called as verl's
main_ppo calls it (`ray.timeline(filename=...)` after the run), on an actor whose method takes a known time. The
script must find each call under its `Class.method`, with a whole duration that holds its execution, and read the
gzipped file the GPU script keeps."""

from __future__ import annotations

import gzip
import importlib.util
import os
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu" / "ray_timeline.py"

DRIVER = textwrap.dedent("""
    import sys, time, ray
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=sys.argv[2])

    @ray.remote
    class WorkerDict:
        def compute_log_prob(self, payload):
            time.sleep(0.2)
            return len(payload)

    @ray.remote
    def fetch():
        time.sleep(0.05)
        return 1

    worker = WorkerDict.remote()
    for _ in range(3):
        ray.get(worker.compute_log_prob.remote(b"x" * 1000))
    ray.get([fetch.remote() for _ in range(4)])
    time.sleep(2)  # task events reach the GCS once a second
    ray.timeline(filename=sys.argv[1])
""")


def load_script():
    spec = importlib.util.spec_from_file_location("ray_timeline", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_calls_are_found_by_name_with_their_execution_inside(verl_python, tmp_path):
    with tempfile.TemporaryDirectory(prefix="rlr-ray-", dir="/tmp") as temp:  # Ray's socket paths stay short
        driver = Path(temp) / "driver.py"
        driver.write_text(DRIVER)
        timeline = tmp_path / "ray-timeline.json"
        proc = subprocess.run([str(verl_python("0.9.1")), str(driver), str(timeline), temp], capture_output=True,
                              text=True, timeout=180, env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})
        assert proc.returncode == 0, proc.stderr[-2000:]
    with open(timeline, "rb") as src, gzip.open(tmp_path / "ray-timeline.json.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    module = load_script()
    rows = {r["name"]: r for r in module.summary(module.calls(module.load(tmp_path / "ray-timeline.json.gz")))}
    log_prob = rows["WorkerDict.compute_log_prob"]
    assert (log_prob["calls"], log_prob["workers"]) == (3, 1)
    assert 0.2 <= log_prob["execute_median_s"] <= log_prob["median_s"] < 1.0
    assert log_prob["deserialize_arguments_median_s"] is not None
    assert log_prob["store_outputs_median_s"] is not None
    fetch = rows["fetch"]
    assert fetch["calls"] == 4 and 0.05 <= fetch["execute_median_s"] < 0.5
    assert rows["WorkerDict.__init__"]["calls"] == 1
    printed = subprocess.run(["python3", str(SCRIPT), str(timeline)], capture_output=True, text=True, check=True)
    assert "| `WorkerDict.compute_log_prob` | 3 | 1 |" in printed.stdout


def test_a_file_that_is_not_a_timeline_is_refused(tmp_path):
    bad = tmp_path / "t.json"
    bad.write_text('{"not": "a list"}')
    proc = subprocess.run(["python3", str(SCRIPT), str(bad)], capture_output=True, text=True)
    assert proc.returncode == 2 and "not a Ray timeline" in proc.stderr


def test_a_file_that_is_not_json_is_refused_naming_it(tmp_path):
    for name, data in (("t.json", b"not json"), ("t.json.gz", b"not gzip")):
        bad = tmp_path / name
        bad.write_bytes(data)
        proc = subprocess.run(["python3", str(SCRIPT), str(bad)], capture_output=True, text=True)
        assert proc.returncode == 2 and f"{bad}: not JSON" in proc.stderr and "Traceback" not in proc.stderr

"""The stage engine (rlrecipes/launch/stages.py) through the images' real entry point: the dataset comes from the
recipe (never a hard-coded name), eval gets the recipe's own validation file, other rlrecipes commands pass
through; `run` and `resume` relaunch the trainer when its stop guard stopped a stalled run (exit 75), with
resume-check before each launch, a bounded number of times -- and on no other exit status: a config error or a
failed preflight must not restart-loop; a stop signal reaches the trainer and ends the stage with 128 + the
signal and one line saying where the same command goes on.

The engine's in-process commands (data, model, resume-check, preflight, ...) are recorded instead of run by
tests/fixtures/stage_stub (STAGE_CALLS, STAGE_CODES_<command>); launchers are stand-in scripts that run for real.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlrecipes.launch.stages import COMPILE_CACHES

REPO = Path(__file__).resolve().parents[2]
STUB = REPO / "tests" / "fixtures" / "stage_stub"
BIN = Path(sys.executable).parent
RECIPE = "qwen2.5-0.5b-gsm8k-ppo"
LAUNCHER = """#!/usr/bin/env bash
printf 'launch %s\\n' "$*" >> "$CALLS"
n=0; [ -f "$CODES_USED" ] && n=$(wc -l < "$CODES_USED")
code=$(sed -n "$((n + 1))p" "$CODES")
echo used >> "$CODES_USED"
exit "${code:-0}"
"""


def home(tmp_path: Path, launcher: str = LAUNCHER) -> Path:
    """A repository home whose recipe has a dataset that is not gsm8k and whose launcher is `launcher`."""
    root = tmp_path / "home"
    if not root.exists():
        shutil.copytree(REPO / "recipes", root / "recipes")
        path = root / "recipes" / f"{RECIPE}.yaml"
        text = path.read_text()
        assert "name: gsm8k" in text
        path.write_text(text.replace("name: gsm8k", "name: mathx"))
    (root / "recipes" / f"{RECIPE}.sh").write_text(launcher)
    return root


def stage_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "PATH": f"{BIN}:/usr/bin:/bin", "CALLS": str(tmp_path / "calls"),
           "STAGE_CALLS": str(tmp_path / "calls"), "PYTHONPATH": f"{STUB}{os.pathsep}{REPO}",
           "RLRECIPES_HOME": str(home(tmp_path) if not (tmp_path / "home").exists() else tmp_path / "home"),
           "RECIPE": RECIPE, "PROFILE": "", **{k: str(tmp_path / k.lower()) for k in
                                               ("MODELS_DIR", "DATA_DIR", "CKPT_DIR", "LOG_DIR", "CACHE_DIR")}}
    for key in ("RUNPOD_POD_ID", *COMPILE_CACHES):  # the host's own must not decide what a test sees
        env.pop(key, None)
    return {**env, **extra}


def entry(tmp_path: Path, *argv: str, **extra: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    calls = tmp_path / "calls"
    calls.unlink(missing_ok=True)
    proc = subprocess.run(["bash", str(REPO / "scripts" / "entrypoint.sh"), *argv], env=stage_env(tmp_path, **extra),
                          capture_output=True, text=True, timeout=120)
    return proc, calls.read_text().splitlines() if calls.exists() else []


def scripted(tmp_path: Path, codes: list[int], *argv: str, **extra: str):
    home(tmp_path)
    (tmp_path / "codes").write_text("".join(f"{c}\n" for c in codes))
    (tmp_path / "codes_used").unlink(missing_ok=True)
    (tmp_path / "ckpt_dir" / RECIPE).mkdir(parents=True, exist_ok=True)
    return entry(tmp_path, *argv, CODES=str(tmp_path / "codes"), CODES_USED=str(tmp_path / "codes_used"), **extra)


def kinds(calls: list[str]) -> list[str]:
    return [c.split()[0] for c in calls if c.split()[0] in ("resume-check", "launch", "preflight")]


def test_data_stage_prepares_the_recipes_dataset(tmp_path):
    home(tmp_path)
    proc, calls = entry(tmp_path, "data")
    assert proc.returncode == 0, proc.stderr
    assert calls == [f"data mathx --out {tmp_path / 'data_dir'}/mathx --template verl"], calls


def test_eval_gets_the_recipes_validation_file_and_args_win(tmp_path):
    home(tmp_path)
    proc, calls = entry(tmp_path, "eval", "/m/merged", "--limit", "5")
    assert proc.returncode == 0, proc.stderr
    assert calls == [f"eval --fast-data {tmp_path / 'data_dir'}/mathx/test.parquet /m/merged --limit 5"]


def test_other_rlrecipes_commands_pass_through_and_the_rest_runs_as_a_command(tmp_path):
    home(tmp_path)
    proc, _ = entry(tmp_path, "plan", "smoke-ppo", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["recipe"] == "smoke-ppo", proc.stderr
    proc, _ = entry(tmp_path, "echo", "hello")
    assert proc.stdout.strip() == "hello"


def test_run_asks_rlrecipes_model_even_when_config_json_is_there(tmp_path):
    # an interrupted download: config.json and a partial shard, no completion marker
    model = tmp_path / "models_dir" / "Qwen2.5-0.5B-Instruct"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "model.safetensors.incomplete").write_bytes(b"\0")
    home(tmp_path)
    proc, calls = entry(tmp_path, "run", STAGE_CODES_preflight="1")
    assert proc.returncode == 1, proc.stderr  # stopped by the failing preflight
    assert f"model {RECIPE} --models-dir {tmp_path / 'models_dir'}" in calls
    assert [c.split()[0] for c in calls] == ["data", "model", "preflight"], calls


# A launcher that records the compile cache variables it was started with.
CACHE_LAUNCHER = """#!/usr/bin/env bash
for key in TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR VLLM_CACHE_ROOT; do
    printf 'env %s=%s\\n' "$key" "${!key-unset}" >> "$CALLS"
done
"""


def launched_env(calls: list[str]) -> dict[str, str]:
    return dict(c.split(" ", 1)[1].split("=", 1) for c in calls if c.startswith("env "))


def test_the_launcher_gets_compile_caches_under_cache_dir_which_outlive_the_container(tmp_path):
    """vLLM, inductor and Triton write their compile caches under CACHE_DIR (compose.yaml's `cache` volume), not
    inside the container, so the next launch -- a relaunch, a new container -- finds them."""
    home(tmp_path, CACHE_LAUNCHER)
    cache = tmp_path / "cache_dir"
    assert not cache.exists()
    proc, calls = entry(tmp_path, "train")
    assert proc.returncode == 0, proc.stderr
    assert launched_env(calls) == {"VLLM_CACHE_ROOT": str(cache / "vllm"),
                                   "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
                                   "TRITON_CACHE_DIR": str(cache / "triton")}, calls
    assert sorted(p.name for p in cache.iterdir() if p.is_dir()) == ["inductor", "triton", "vllm"]


def test_a_compile_cache_the_user_set_is_kept(tmp_path):
    home(tmp_path, CACHE_LAUNCHER)
    mine = tmp_path / "my-vllm-cache"
    proc, calls = entry(tmp_path, "train", VLLM_CACHE_ROOT=str(mine), TRITON_CACHE_DIR="")
    assert proc.returncode == 0, proc.stderr
    cache = tmp_path / "cache_dir"
    # an empty value counts as unset (torch would make a cache in the working directory of every process)
    assert launched_env(calls) == {"VLLM_CACHE_ROOT": str(mine), "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
                                   "TRITON_CACHE_DIR": str(cache / "triton")}, calls
    assert not mine.exists() and not (cache / "vllm").exists()


def test_a_cache_dir_that_cannot_be_made_stops_the_launch_in_one_line(tmp_path):
    home(tmp_path, CACHE_LAUNCHER)
    (tmp_path / "afile").write_text("")
    proc, calls = entry(tmp_path, "train", CACHE_DIR=str(tmp_path / "afile" / "cache"))
    assert proc.returncode == 1, proc.stderr
    assert launched_env(calls) == {}, calls
    assert proc.stderr.strip().splitlines()[-1].startswith(
        f"error: CACHE_DIR: cannot create the compile cache folder {tmp_path}/afile/cache/"), proc.stderr


def vllm_index(entries: int = 2) -> str:
    """A vLLM 0.24 compile-cache index as CompilerManager.save_to_file writes it: pprint (indent 4) of
    {(compile range, graph index, compiler name): {"graph_handle": ..., "cache_key": ...}}, the range printed as
    vllm.config.utils.Range prints itself, "(start, end)"."""
    import pprint

    cache = {((1, 8192), i, "inductor_standalone"): {
        "graph_handle": (f"artifact_compile_range_1_8192_subgraph_{i}",) * 2, "cache_key": f"f{i:031x}"}
        for i in range(entries)}
    return pprint.PrettyPrinter(indent=4).pformat(cache)


def test_a_damaged_vllm_cache_index_is_set_aside_before_the_launch_and_a_whole_one_kept(tmp_path):
    """vLLM 0.24 writes its compile-cache index with a plain open() and reads it with ast.literal_eval at the next
    start, unguarded: an index cut by a stop inside its write would fail every later launch with the cache on. The
    train stage sets such an index aside (vLLM then compiles again) and keeps a whole one, twice in a row."""
    import ast

    home(tmp_path, CACHE_LAUNCHER)
    root = tmp_path / "cache_dir" / "vllm" / "torch_compile_cache"
    whole = root / "0a1b2c3d4e" / "rank_0_0" / "backbone" / "vllm_compile_cache.py"
    cut = root / "5f6a7b8c9d" / "rank_0_0" / "backbone" / "vllm_compile_cache.py"
    listed = root / "5f6a7b8c9d" / "rank_1_0" / "vllm_compile_cache.py"
    for path, text in ((whole, vllm_index()), (cut, vllm_index()[:150]), (listed, "[1, 2]")):
        path.parent.mkdir(parents=True)
        path.write_text(text)
    assert isinstance(ast.literal_eval(whole.read_text()), dict)  # the whole one is what vLLM reads back
    artefact = cut.parent / "artifact_compile_range_1_8192_subgraph_0"
    artefact.write_bytes(b"compiled")
    for attempt in (1, 2):
        proc, calls = entry(tmp_path, "train")
        assert proc.returncode == 0, proc.stderr
        assert [c for c in calls if c.startswith("env VLLM_CACHE_ROOT")] == [f"env VLLM_CACHE_ROOT={root.parent}"]
        lines = [line for line in proc.stderr.splitlines() if "compile-cache index" in line]
        if attempt == 1:
            assert lines == [
                f"[rlrecipes] train: vLLM's compile-cache index {cut} does not parse (SyntaxError): set aside as "
                "vllm_compile_cache.py.damaged (vLLM compiles that graph again)",
                f"[rlrecipes] train: vLLM's compile-cache index {listed} holds a list, not a dict: set aside as "
                "vllm_compile_cache.py.damaged (vLLM compiles that graph again)"], proc.stderr
        else:
            assert lines == [], proc.stderr
        assert whole.read_text() == vllm_index() and artefact.read_bytes() == b"compiled"
        assert not cut.exists() and cut.with_name("vllm_compile_cache.py.damaged").read_text() == vllm_index()[:150]
        assert not listed.exists()


def test_a_damaged_vllm_index_that_cannot_be_set_aside_stops_the_launch_in_one_line(tmp_path):
    home(tmp_path, CACHE_LAUNCHER)
    folder = tmp_path / "cache_dir" / "vllm" / "torch_compile_cache" / "5f6a7b8c9d" / "rank_0_0"
    index = folder / "vllm_compile_cache.py"
    (index.parent / "vllm_compile_cache.py.damaged").mkdir(parents=True)  # a folder where the rename must go
    (index.parent / "vllm_compile_cache.py.damaged" / "x").write_text("")
    index.write_text(vllm_index()[:99])
    proc, calls = entry(tmp_path, "train")
    assert proc.returncode == 1 and launched_env(calls) == {}, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(
        f"error: VLLM_CACHE_ROOT: vLLM's compile-cache index {index} does not parse (SyntaxError) and cannot be set "
        "aside: "), proc.stderr
    assert index.read_text() == vllm_index()[:99]


@pytest.mark.parametrize("text, why", [
    ("{((1, 8192), 0, 'inductor_standalone'): {'graph_handle': ('a', 'a'), 'cache_key': 'k'}}", None),
    ("{}", None),
    ("{((1, 8192), 0, 'inductor_standalone'): {'graph_handle': ('a', 'a'), ", "does not parse (SyntaxError)"),
    ("", "does not parse (SyntaxError)"),
    ("{('1, 8192', 0, 'inductor_standalone'): {}}",
     "has a key vLLM does not read: ('1, 8192', 0, 'inductor_standalone')"),
    ("{((1, 8192), '0', 'inductor_standalone'): {}}",
     "has a key vLLM does not read: ((1, 8192), '0', 'inductor_standalone')"),
    ("{((1, 8192), 0): {}}", "has a key vLLM does not read: ((1, 8192), 0)"),
    ("Range(start=1, end=8192)", "does not parse (ValueError)"),
])
def test_the_vllm_index_check_reads_what_vllms_reader_reads(text, why):
    from rlrecipes.launch.stages import vllm_index_problem

    assert vllm_index_problem(text) == why


@pytest.mark.parametrize("stage_name", ["run", "resume"])
def test_exit_75_relaunches_after_resume_check_until_the_run_ends(tmp_path, stage_name):
    proc, calls = scripted(tmp_path, [75, 75, 0], stage_name, "trainer.total_epochs=1")
    assert proc.returncode == 0, proc.stderr
    assert kinds(calls) == ["resume-check", "preflight", "launch"] * 3, calls
    assert [c for c in calls if c.startswith("launch")] == ["launch trainer.total_epochs=1"] * 3
    assert proc.stderr.count("] the run stalled and was stopped (exit 75); relaunch") == 2, proc.stderr


@pytest.mark.parametrize("code", [1, 2, 137])
def test_other_failures_are_not_relaunched(tmp_path, code):
    proc, calls = scripted(tmp_path, [code, 0], "run")
    assert proc.returncode == code, proc.stderr
    assert kinds(calls) == ["resume-check", "preflight", "launch"], calls


def watchdog_says(tmp_path: Path, code: str, message: str, age_s: float = 0.0) -> None:
    """The watchdog's status file at its default place under the checkpoint root, as its pass writes it."""
    status = tmp_path / "ckpt_dir" / ".watchdog" / "status.json"
    status.parent.mkdir(parents=True, exist_ok=True)
    status.write_text(json.dumps({"version": 1, "time": time.time() - age_s, "interval_s": 5.0, "healthy": False,
                                  "findings": [{"path": "", "severity": "error", "code": code, "message": message}]}))


def test_a_launch_that_fails_on_a_full_volume_says_so_and_where_it_goes_on(tmp_path):
    """verl's own error for a save that ran out of space is torch's "unexpected pos ..." (seen on a GPU host):
    the stage says what it was, from the watchdog's status, and which checkpoint the same command goes on from."""
    ckpt = tmp_path / "ckpt_dir" / RECIPE
    (ckpt / "global_step_5").mkdir(parents=True)
    (ckpt / "latest_checkpointed_iteration.txt").write_text("5")
    watchdog_says(tmp_path, "budget-exceeded", "the budget cannot hold the next checkpoint: it needs 12.1 MiB")
    proc, calls = scripted(tmp_path, [1], "resume")
    assert proc.returncode == 1 and kinds(calls) == ["resume-check", "preflight", "launch"], proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("[rlrecipes] train failed (exit 1) with the checkpoint volume full (the watchdog: the "
                           "budget cannot hold the next checkpoint: it needs 12.1 MiB); free space under "), last
    assert last.endswith(f"it goes on from the checkpoint of step 5 ({ckpt})"), last


@pytest.mark.parametrize("why", ["no status", "stale status", "another finding"])
def test_a_failure_with_room_on_the_volume_says_nothing_of_it(tmp_path, why):
    if why == "stale status":
        watchdog_says(tmp_path, "disk-full", "the checkpoint volume is full", age_s=3600)
    elif why == "another finding":
        watchdog_says(tmp_path, "run-stalled", "no step logged for 600 s")
    proc, _ = scripted(tmp_path, [1], "resume")
    assert proc.returncode == 1 and "volume full" not in proc.stderr, proc.stderr


def test_without_a_watchdog_the_free_space_is_weighed_against_a_checkpoint(tmp_path, monkeypatch):
    from rlrecipes.launch import stages

    step = tmp_path / "global_step_5" / "actor"
    step.mkdir(parents=True)
    (step / "model_world_size_1_rank_0.pt").write_bytes(b"x" * 3 * 2**20)
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("5")
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(stages.shutil, "disk_usage", lambda path: usage._replace(free=2**20))
    assert stages.volume_full(tmp_path, None) == ("1.0 MiB free on it, and a checkpoint (global_step_5) takes "
                                                  "3.0 MiB")
    monkeypatch.setattr(stages.shutil, "disk_usage", lambda path: usage._replace(free=4 * 2**20))
    assert stages.volume_full(tmp_path, None) is None
    # a malformed watchdog status is no finding (and no crash of the stage that reads it)
    status = tmp_path / "status.json"
    for findings in (5, "disk-full", {"code": "disk-full"}, [None, "disk-full"]):
        status.write_text(json.dumps({"time": time.time(), "interval_s": 5, "findings": findings}))
        assert stages.volume_full(tmp_path, status) is None


def test_relaunches_are_bounded(tmp_path):
    proc, calls = scripted(tmp_path, [75] * 10, "run", STALL_RESTARTS="2")
    assert proc.returncode == 75
    assert kinds(calls) == ["resume-check", "preflight", "launch"] * 3, calls
    assert proc.stderr.strip().splitlines()[-1].endswith("(STALL_RESTARTS=2); giving up"), proc.stderr


def test_a_bad_stall_restarts_is_one_line(tmp_path):
    proc, calls = scripted(tmp_path, [75], "resume", STALL_RESTARTS="three")
    assert proc.returncode == 2 and "STALL_RESTARTS: must be a whole number, not 'three'" in proc.stderr
    assert calls == []


def test_a_failed_preflight_on_relaunch_stops(tmp_path):
    proc, calls = scripted(tmp_path, [75, 0], "run", STAGE_CODES_preflight="0 3")
    assert proc.returncode == 3, proc.stderr
    assert kinds(calls) == ["resume-check", "preflight", "launch", "resume-check", "preflight"], calls


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stop_signal_reaches_the_trainer_and_is_not_relaunched(tmp_path, sig):
    """The trainer exits 75 on the signal (a stall's status): a stop is still a stop -- 128 + the signal, no
    relaunch, and one line saying where the same command goes on."""
    home(tmp_path, "#!/usr/bin/env bash\nprintf 'launch\\n' >> \"$CALLS\"\n"
                   "trap 'echo got >> \"$CALLS\"; exit 75' TERM INT HUP\nwhile :; do sleep 0.1; done\n")
    ckpt = tmp_path / "ckpt_dir" / RECIPE
    (ckpt / "global_step_4").mkdir(parents=True)
    (ckpt / "latest_checkpointed_iteration.txt").write_text("4")
    (tmp_path / "calls").unlink(missing_ok=True)
    proc = subprocess.Popen(["bash", str(REPO / "scripts" / "entrypoint.sh"), "resume"], env=stage_env(tmp_path),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    # the launcher's own line: a substring test matched the preflight call before it (its --env-file is launch.env)
    while "launch" not in ((tmp_path / "calls").read_text().splitlines() if (tmp_path / "calls").exists() else []):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + sig, err
    assert [c for c in (tmp_path / "calls").read_text().splitlines() if c in ("launch", "got")] == ["launch", "got"]
    assert err.strip().splitlines()[-1] == (f"[rlrecipes] train stopped by {sig.name} (exit {128 + sig}); the same "
                                            f"command goes on from the checkpoint of step 4 ({ckpt})"), err


# A stand-in trainer under the real stop guard: resumes from verl's tracker, saves each step the way verl
# does (step dir, then the tracker), logs each step to its own launch's file; the first launch hangs after
# step 3 (alive, training nothing), a relaunch first "loads the model" for a while, then trains to the end.
RESUMING_TRAINER = r'''
import json, os, sys, time
ckpt, logs, total, pause, load = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
os.makedirs(ckpt, exist_ok=True)
tracker = os.path.join(ckpt, "latest_checkpointed_iteration.txt")
start = int(open(tracker).read()) if os.path.exists(tracker) else 0
first = not os.path.exists(os.path.join(ckpt, "launches"))
with open(os.path.join(ckpt, "launches"), "a") as fh:
    fh.write(f"start={start}\n")
if not first:
    time.sleep(load)
with open(os.path.join(logs, f"metrics-launch{start}.jsonl"), "w") as jsonl:
    for step in range(start + 1, total + 1):
        time.sleep(pause)
        os.makedirs(os.path.join(ckpt, f"global_step_{step}"))
        open(os.path.join(ckpt, f"global_step_{step}", "state.txt"), "w").write(str(step))
        open(tracker + ".tmp", "w").write(str(step))
        os.replace(tracker + ".tmp", tracker)
        jsonl.write(json.dumps({"step": step, "data": {"timing_s/step": pause}}) + "\n")
        jsonl.flush()
        if first and step == 3:
            time.sleep(3600)
'''

GUARDED_LAUNCHER = """#!/usr/bin/env bash
printf 'launch\\n' >> "$CALLS"
mkdir -p "$LOG_DIR/run"
exec python3 -c 'import sys
from rlrecipes.verl import stopguard
stopguard.STALL_POLL_S = 0.3
sys.exit(stopguard.main(sys.argv[1:]))' --ckpt-dir "$CKPT_DIR/{recipe}" --wait 5 -- \\
    python3 -c "$TRAINER" "$CKPT_DIR/{recipe}" "$LOG_DIR/run" 6 0.3 1.0
"""


def test_a_stalled_run_is_stopped_relaunched_and_resumes_from_its_last_checkpoint(tmp_path):
    """Watchdog (real, --progress) + stop guard (real, RLRECIPES_STALL_STATUS) + entrypoint `run`: the hang is
    reported, the guard stops the trainer with 75, the entrypoint relaunches it after resume-check, and the
    relaunch -- still reported stalled by the watchdog while it loads -- is not stopped, resumes at step 3
    and finishes."""
    home(tmp_path, GUARDED_LAUNCHER.replace("{recipe}", RECIPE))
    logs, wd = tmp_path / "log_dir" / "run", tmp_path / "wd"
    logs.mkdir(parents=True)
    wd.mkdir()
    status = wd / ".watchdog" / "status.json"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    dog = subprocess.Popen([sys.executable, "-m", "rlrecipes", "watchdog", "--root", str(wd), "--interval", "0.3",
                            "--progress", str(logs), "--stall-after", "3", "--total-steps", "6",
                            "--log-level", "error"], env=env)
    started = time.monotonic()
    try:
        proc, calls = entry(tmp_path, "run", TRAINER=RESUMING_TRAINER, RLRECIPES_STALL_STATUS=str(status))
    finally:
        dog.terminate()
        dog.wait(timeout=30)
    run_dir = tmp_path / "ckpt_dir" / RECIPE
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "the watchdog reports the run stalled" in proc.stderr and "relaunch 1 of 3" in proc.stderr
    assert "relaunch 2" not in proc.stderr, proc.stderr[-3000:]
    assert (run_dir / "launches").read_text().split() == ["start=0", "start=3"]
    assert (run_dir / "latest_checkpointed_iteration.txt").read_text() == "6"
    assert sorted(p.name for p in run_dir.glob("global_step_*")) == [f"global_step_{i}" for i in range(1, 7)]
    # no checkpoint dir before the first launch: resume-check runs (and repairs the tracker) before the relaunch
    assert [c.split()[0] for c in calls if c.split()[0] in ("resume-check", "launch")] == \
        ["launch", "resume-check", "launch"]
    assert time.monotonic() - started < 90

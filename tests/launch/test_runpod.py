"""deploy/runpod/template.json against RunPod's documented template fields, the printed create commands,
and scripts/runpod-start.sh (the pod's start hook) run for real against a fake /workspace."""

from __future__ import annotations

import copy
import json
import os
import shlex
import shutil
import stat
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from rlrecipes.errors import RecipeError
from rlrecipes.launch.runpod import (
    default_template,
    graphql_command,
    load_template,
    runpodctl_command,
    validate_template,
)
from support.require import linter

REPO = Path(__file__).resolve().parents[2]
IMAGE = "docker.io/someone/rlrecipes-a100:verl0.8.0-cu128-torch2.8.0-py3.12-runpod"


@pytest.fixture
def shipped() -> dict:
    return load_template(default_template())


def _env(template: dict, key: str, value: str | None) -> dict:
    t = copy.deepcopy(template)
    t["env"] = [e for e in t["env"] if e["key"] != key]
    if value is not None:
        t["env"].append({"key": key, "value": value})
    return t


def test_shipped_template_validates_with_an_image(shipped):
    check = validate_template(shipped, image=IMAGE)
    assert check.template["imageName"] == IMAGE
    assert check.env["RECIPE"] == "qwen2.5-3b-gsm8k-grpo-lora"
    assert check.env["AUTO_TRAIN"] == "1"
    assert check.start_args == ["bash", "/opt/rlrecipes/scripts/runpod-start.sh"]
    assert check.template["volumeMountPath"] == "/workspace"
    assert not [w for w in check.warnings if "tag" in w]  # the tag is the A100 image's


def test_shipped_template_needs_the_image_set(shipped):
    with pytest.raises(RecipeError, match="placeholder") as info:
        validate_template(shipped)
    assert info.value.where.endswith("imageName")
    assert "--image" in info.value.hint


def _set(key, value):
    def edit(t):
        t[key] = value
        return t
    return edit


def _drop(key):
    def edit(t):
        del t[key]
        return t
    return edit


@pytest.mark.parametrize(("edit", "where", "message"), [
    (_set("imageNmae", "x"), "imageNmae", "unknown field 'imageNmae'"),
    (_set("gpuCount", 4), "gpuCount", "unknown field"),
    (_drop("volumeInGb"), "template.json", "missing required field 'volumeInGb'"),
    (_drop("env"), "template.json", "missing required field 'env'"),
    (_set("containerDiskInGb", "50"), "containerDiskInGb", "expected int"),
    (_set("volumeInGb", True), "volumeInGb", "expected int"),
    (_set("containerDiskInGb", 5), "containerDiskInGb", "too small"),
    (_set("volumeInGb", 20), "volumeInGb", "cannot hold qwen2.5-3b-gsm8k-grpo-lora"),
    (_set("volumeMountPath", "/runpod"), "volumeMountPath", "must be '/workspace'"),
    (_set("ports", "8888/http"), "ports", "must expose 22/tcp"),
    (_set("ports", "22/tcp"), "ports", "must expose 8888/http"),
    (_set("ports", "8888/http,22/udp"), "ports", "is not PORT/http or PORT/tcp"),
    (_set("ports", "8888/http,22/tcp,22/tcp"), "ports", "listed twice"),
    (_set("ports", "8888/http,99999/tcp"), "ports", "is not PORT/http"),
    (_set("name", "  "), "name", "must not be empty"),
    (_set("dockerArgs", "sleep infinity"), "dockerArgs", "does not run scripts/runpod-start.sh"),
    (_set("dockerStartCmd", ["bash", "/opt/rlrecipes/scripts/runpod-start.sh"]), "template.json",
     "exactly one of dockerArgs"),
    (_set("env", [{"key": "RECIPE"}]), "env[0]", "must be {\"key\""),
    (_set("env", {"RECIPE": "x"}), "env", "expected list"),
    (lambda t: _env(t, "HF_TOKEN", None), "env", "missing HF_TOKEN"),
    (lambda t: _env(t, "AUTO_TRAIN", None), "env", "missing AUTO_TRAIN"),
    (lambda t: _env(t, "AUTO_TRAIN", "yes"), "AUTO_TRAIN", "must be \"0\" or \"1\""),
    (lambda t: _env(t, "WANDB_API_KEY", "0123456789abcdef"), "WANDB_API_KEY", "literal value"),
    # 8888/http exposed with nothing serving it: RunPod's /start.sh starts Jupyter only with a password.
    (lambda t: _env(t, "JUPYTER_PASSWORD", None), "env", "nothing would serve 8888/http"),
    (lambda t: _env(t, "HF_TOKEN", "hf_abc"), "HF_TOKEN", "literal value"),
    (lambda t: _env(t, "RECIPE", "qwen2.5-3b-gsm8k-grpo"), "env.RECIPE", "not a shipped recipe"),
    (lambda t: _env(t, "RECIPE", "qwen2.5-0.5b-gsm8k-ppo"), "env.RECIPE", "runs on the p40 image"),
    (lambda t: {**t, "env": t["env"] + [{"key": "RECIPE", "value": "x"}]}, "env[", "set twice"),
    (lambda t: {**t, "env": t["env"] + [{"key": "BAD-NAME", "value": "x"}]}, "env[", "not a valid variable name"),
])
def test_template_errors_name_the_field(shipped, edit, where, message):
    broken = edit(copy.deepcopy(shipped))
    with pytest.raises(RecipeError) as info:
        validate_template(broken, image=IMAGE)
    assert message in info.value.message, info.value
    assert where in (info.value.where or ""), info.value.where


@pytest.mark.parametrize(("image", "error"), [
    ("", "is empty"),
    # The plain A100 image has no /start.sh: no SSH, no Jupyter on the pod (the old template shipped it).
    ("docker.io/me/a100:verl0.8.0-cu128-torch2.8.0-py3.12", "no /start.sh"),
    ("<registry>/rlrecipes/a100:tag", "placeholder"),
    ("docker.io/me/a100 :tag", "whitespace"),
])
def test_bad_images(shipped, image, error):
    with pytest.raises(RecipeError, match=error):
        validate_template(shipped, image=image)


def test_secrets_may_be_empty_or_references(shipped):
    t = _env(_env(shipped, "WANDB_API_KEY", ""), "HF_TOKEN", "{{RUNPOD_SECRET_my_hf}}")
    check = validate_template(t, image=IMAGE)
    assert check.env["WANDB_API_KEY"] == "" and check.env["HF_TOKEN"] == "{{RUNPOD_SECRET_my_hf}}"


def test_foreign_tag_is_a_warning_not_an_error(shipped):
    check = validate_template(shipped, image="ghcr.io/me/trainer:latest")
    (warning,) = [w for w in check.warnings if "'latest'" in w]
    assert "is none of the RunPod images' tags" in warning
    assert "verl0.8.0-cu128-torch2.8.0-py3.12-runpod (a100)" in warning
    assert "verl0.9.1-cu130-torch2.11.0-py3.12-runpod (hopper)" in warning


def test_malformed_json_names_line_and_column(tmp_path):
    bad = tmp_path / "t.json"
    bad.write_text('{\n  "name": "x",\n  "ports": "8888/http" "22/tcp"\n}\n')
    with pytest.raises(RecipeError) as info:
        load_template(bad)
    assert info.value.where == f"{bad}:3:24"


def _words(printed: str) -> list[str]:
    """What a shell makes of the printed command: backslash-newline joins lines, then word splitting."""
    return shlex.split(printed.replace("\\\n", " "))


def _printed(capsys, argv) -> tuple[int, str, str]:
    from rlrecipes.cli import main

    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_prints_a_runpodctl_command_that_parses_back(shipped, capsys, monkeypatch):
    monkeypatch.delenv("RUNPOD_IMAGE", raising=False)
    code, out, err = _printed(capsys, ["runpod-template", "--image", IMAGE])
    assert code == 0, err
    argv = _words(out)
    check = validate_template(shipped, image=IMAGE)
    assert argv == runpodctl_command(check)
    assert argv[:3] == ["runpodctl", "template", "create"]
    flags = dict(zip(argv[3::2], argv[4::2]))
    assert flags["--image"] == IMAGE
    assert flags["--ports"] == "8888/http,22/tcp"
    assert flags["--volume-mount-path"] == "/workspace"
    assert flags["--volume-in-gb"] == str(shipped["volumeInGb"])
    assert flags["--docker-start-cmd"].split(",") == ["bash", "/opt/rlrecipes/scripts/runpod-start.sh"]
    env = json.loads(flags["--env"])
    assert set(env) >= {"WANDB_API_KEY", "HF_TOKEN", "RECIPE", "AUTO_TRAIN"}
    assert env["HF_TOKEN"] == "{{ RUNPOD_SECRET_HF_TOKEN }}"


def test_cli_without_image_fails_with_exit_2(capsys, monkeypatch):
    monkeypatch.delenv("RUNPOD_IMAGE", raising=False)
    code, out, err = _printed(capsys, ["runpod-template"])
    assert code == 2 and out == ""
    assert "placeholder" in err


def test_cli_takes_the_image_from_the_environment(capsys, monkeypatch):
    monkeypatch.setenv("RUNPOD_IMAGE", IMAGE)
    code, out, _ = _printed(capsys, ["runpod-template", "--json"])
    assert code == 0 and json.loads(out)["imageName"] == IMAGE


def test_graphql_call_carries_every_field(shipped, capsys):
    code, out, _ = _printed(capsys, ["runpod-template", "--image", IMAGE, "--graphql"])
    assert code == 0
    argv = _words(out)
    assert argv == graphql_command(validate_template(shipped, image=IMAGE))
    # double quotes, so the shell puts the key in; the key never appears in the output
    assert '"https://api.runpod.io/graphql?api_key=${RUNPOD_API_KEY}"' in out
    body = json.loads(argv[argv.index("--data") + 1])
    query = body["query"]
    assert query.startswith("mutation { saveTemplate(input: {")
    for key in ("name", "imageName", "containerDiskInGb", "volumeInGb", "volumeMountPath", "ports", "env",
                "dockerArgs", "readme"):
        assert f"{key}: " in query
    assert f"imageName: {json.dumps(IMAGE)}" in query
    assert 'volumeMountPath: "/workspace"' in query
    assert '{key: "AUTO_TRAIN", value: "1"}' in query


# ------------------------------------------------------------------------------ the start hook
FAKE_RLRECIPES = textwrap.dedent("""\
    #!/usr/bin/env bash
    # Stand-in for the rlrecipes CLI: records each call and writes what the real stage would.
    echo "rlrecipes $*" >> "$CALLS"
    case "$1" in
      data) out=""; while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
            mkdir -p "$out"; echo '{}' > "$out/manifest.json" ;;
      model) mkdir -p "$MODELS_DIR/Qwen2.5-3B-Instruct"; echo '{}' > "$MODELS_DIR/Qwen2.5-3B-Instruct/config.json" ;;
      merge) out=""; while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
             mkdir -p "$out"; echo '{}' > "$out/merge-info.json" ;;
      eval) out=""; while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
            mkdir -p "$out"; echo '{}' > "$out/eval-summary.json" ;;
      report) out=""; while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
              mkdir -p "$out"; echo report > "$out/report.md" ;;
      watchdog) exec "$RLRECIPES_PYTHON" -m rlrecipes "$@" ;;  # the real one
      # the real stage engine; the commands it runs (preflight, resume-check) recorded by tests/fixtures/stage_stub
      stage) PYTHONPATH="$STAGE_STUB:$PYTHONPATH" STAGE_CALLS="$CALLS" STAGE_CALLS_PREFIX="rlrecipes " \
                 STAGE_CODES_preflight="${FAIL_PREFLIGHT:+4}" exec "$RLRECIPES_PYTHON" -m rlrecipes "$@" ;;
      *) echo "unexpected command: $*" >&2; exit 9 ;;
    esac
""")
FAKE_LAUNCHER = textwrap.dedent("""\
    #!/usr/bin/env bash
    echo "train $*" >> "$CALLS"
    run="$CKPT_DIR/qwen2.5-3b-gsm8k-grpo-lora"
    if [ -n "${FAIL_TRAIN:-}" ]; then
        mkdir -p "$run/global_step_20/actor"; echo 20 > "$run/latest_checkpointed_iteration.txt"; exit 3
    fi
    mkdir -p "$run/global_step_35/actor"
    echo 35 > "$run/latest_checkpointed_iteration.txt"
""")
FAKE_START = textwrap.dedent("""\
    #!/usr/bin/env bash
    echo "runpod /start.sh" >> "$CALLS"
""")


@pytest.fixture
def pod(tmp_path):
    """A fake pod: /workspace, RunPod's /start.sh, the rlrecipes CLI and the recipe launcher, all stand-ins
    on PATH -- the hook's own logic (order, skips, resume, paths) is what runs."""
    if shutil.which("bash") is None:
        pytest.skip("needs bash")
    bin_dir = tmp_path / "bin"
    home = tmp_path / "opt"
    shutil.copytree(REPO / "recipes", home / "recipes")  # the real recipes; the launcher is replaced below
    bin_dir.mkdir()
    for path, text in ((bin_dir / "rlrecipes", FAKE_RLRECIPES),
                       (home / "recipes" / "qwen2.5-3b-gsm8k-grpo-lora.sh", FAKE_LAUNCHER),
                       (tmp_path / "start.sh", FAKE_START)):
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp_path), "CALLS": str(tmp_path / "calls.log"),
        "WORKSPACE": str(workspace), "RLRECIPES_HOME": str(home), "RUNPOD_START_SH": str(tmp_path / "start.sh"),
        "RECIPE": "qwen2.5-3b-gsm8k-grpo-lora", "AUTO_TRAIN": "1", "RUNPOD_HOOK_STAY": "0",
        "RLRECIPES_PYTHON": str(Path(os.sys.executable)), "PYTHONPATH": str(REPO),
        "STAGE_STUB": str(REPO / "tests" / "fixtures" / "stage_stub"),
    }
    return tmp_path, env


def _hook(env: dict, **extra) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(REPO / "scripts" / "runpod-start.sh")], env={**env, **extra},
                          capture_output=True, text=True, timeout=120)


def _calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls.log"
    return path.read_text().splitlines() if path.exists() else []


def test_hook_runs_the_pipeline_under_workspace_then_skips_on_restart(pod):
    tmp_path, env = pod
    ws = Path(env["WORKSPACE"])
    proc = _hook(env)
    assert proc.returncode == 0, proc.stderr
    calls = _calls(tmp_path)
    stages = [c.split()[1] if c.startswith("rlrecipes") else c.split()[0] for c in calls
              if not c.startswith(("runpod", "rlrecipes watchdog", "rlrecipes stage"))]
    assert f"rlrecipes stage --recipe {env['RECIPE']} --profile  resume" in calls
    assert stages == ["data", "model", "preflight", "train", "merge", "eval", "report"]
    # the watchdog ran beside the trainer (it starts in the background, so its line may come after preflight's)
    (watchdog,) = [c for c in calls if c.startswith("rlrecipes watchdog")]
    assert watchdog.startswith(f"rlrecipes watchdog --root {ws / 'checkpoints'} --keep-last 2 --interval 30 "
                               f"--progress {ws / 'logs' / 'qwen2.5-3b-gsm8k-grpo-lora'} --total-steps ")
    assert _watchdog_gone(proc.stderr), "the watchdog outlived the train stage"
    assert "runpod /start.sh" in calls  # SSH/Jupyter kept
    assert any(c.startswith("rlrecipes data gsm8k --out " + str(ws / "data" / "gsm8k")) for c in calls)
    assert any(f"--models-dir {ws / 'models'}" in c for c in calls)
    merge = next(c for c in calls if c.startswith("rlrecipes merge"))
    assert f"{ws}/checkpoints/qwen2.5-3b-gsm8k-grpo-lora" in merge and f"{ws}/models/merged/" in merge
    assert (ws / "reports" / "qwen2.5-3b-gsm8k-grpo-lora" / "report.md").exists()
    assert "train.done" in os.listdir(ws / "logs" / "qwen2.5-3b-gsm8k-grpo-lora")
    assert "[runpod-start" in (ws / "logs" / "runpod-start.log").read_text()

    # A stopped pod starts again: every finished stage is skipped, nothing is retrained.
    (tmp_path / "calls.log").unlink()
    proc = _hook(env)
    assert proc.returncode == 0, proc.stderr
    again = [c for c in _calls(tmp_path) if not c.startswith("runpod")]
    assert again == [], again
    assert "already done" in proc.stderr


def _watchdog_gone(stderr: str) -> bool:
    """The watchdog the hook started (it logs its pid) has exited."""
    import re

    (pid,) = re.findall(r"watchdog \(pid (\d+)\) guards", stderr)
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    return False


# A stand-in trainer: resumes from verl's tracker, saves each step in verl's layout (the watchdog's own
# simulator: shards, then the tracker) and logs it to its launch's metrics file; the first launch hangs after
# step 3 (alive, training nothing), a relaunch first "loads the model" for a while, then trains to the end.
SAVING_TRAINER = r'''
import json, os, sys, time
from rlrecipes.watchdog.simulate import save_checkpoint
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
        save_checkpoint(ckpt, step, shard_bytes=1024)
        jsonl.write(json.dumps({"step": step, "data": {"timing_s/step": pause}}) + "\n")
        jsonl.flush()
        if first and step == 3:
            time.sleep(3600)
'''

# The recipe's launcher as the generated one is: the real stop guard execs the trainer.
GUARDED_LAUNCHER = """#!/usr/bin/env bash
echo "train $*" >> "$CALLS"
run=qwen2.5-3b-gsm8k-grpo-lora
mkdir -p "$LOG_DIR/$run"
exec "$RLRECIPES_PYTHON" -c 'import sys
from rlrecipes.verl import stopguard
stopguard.STALL_POLL_S = 0.3
sys.exit(stopguard.main(sys.argv[1:]))' --ckpt-dir "$CKPT_DIR/$run" --wait 5 -- \\
    "$RLRECIPES_PYTHON" -c "$TRAINER" "$CKPT_DIR/$run" "$LOG_DIR/$run" 6 0.3 1.0
"""


def test_hook_runs_the_watchdog_which_gets_a_stalled_run_relaunched(pod):
    """The real watchdog (started by the hook), the real stop guard, the hook's train stage: the hang after
    step 3 is reported, the guard stops the trainer (exit 75), the hook relaunches it once, it resumes at 3,
    finishes at 6, and the pipeline goes on; the watchdog is stopped with the stage."""
    tmp_path, env = pod
    ws = Path(env["WORKSPACE"])
    launcher = Path(env["RLRECIPES_HOME"]) / "recipes" / "qwen2.5-3b-gsm8k-grpo-lora.sh"
    launcher.write_text(GUARDED_LAUNCHER)
    started = time.monotonic()
    proc = _hook(env, TRAINER=SAVING_TRAINER, WATCHDOG_INTERVAL="0.3",
                 WATCHDOG_ARGS="--stall-after 3 --grace 1 --log-level error")
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = ws / "checkpoints" / "qwen2.5-3b-gsm8k-grpo-lora"
    assert "the run stalled and was stopped (exit 75); relaunch 1 of 3" in proc.stderr, proc.stderr[-3000:]
    assert "relaunch 2" not in proc.stderr
    assert (run_dir / "launches").read_text().split() == ["start=0", "start=3"]
    assert (run_dir / "latest_checkpointed_iteration.txt").read_text() == "6"
    assert (run_dir / "global_step_6").is_dir() and not (run_dir / "global_step_1").exists()  # pruned (--keep-last 2)
    calls = [c for c in _calls(tmp_path) if not c.startswith("runpod")]
    assert [c.split()[1] for c in calls if c.startswith("rlrecipes") and c.split()[1] not in ("watchdog", "stage")] == [
        "data", "model", "preflight", "resume-check", "preflight", "merge", "eval", "report"]
    assert json.loads((ws / "checkpoints" / ".watchdog" / "status.json").read_text())  # it wrote its status
    assert _watchdog_gone(proc.stderr), "the watchdog outlived the train stage"
    assert (ws / "logs" / "qwen2.5-3b-gsm8k-grpo-lora" / "train.done").exists()
    assert time.monotonic() - started < 90


def test_hook_without_a_watchdog_says_so(pod):
    tmp_path, env = pod
    proc = _hook(env, WATCHDOG="0")
    assert proc.returncode == 0, proc.stderr
    assert "WATCHDOG=0: no watchdog" in proc.stderr
    assert not [c for c in _calls(tmp_path) if c.startswith("rlrecipes watchdog")]


def test_hook_resumes_an_unfinished_run(pod):
    tmp_path, env = pod
    ws = Path(env["WORKSPACE"])
    proc = _hook(env, FAIL_TRAIN="1")
    assert proc.returncode == 3, proc.stderr  # train's own exit code
    calls = [c for c in _calls(tmp_path) if not c.startswith("runpod")]
    assert calls[-1].startswith("train") and not any("merge" in c for c in calls)
    assert "train failed with exit code 3" in proc.stderr
    (tmp_path / "calls.log").unlink()
    proc = _hook(env)
    assert proc.returncode == 0, proc.stderr
    calls = [c for c in _calls(tmp_path) if not c.startswith("runpod")]
    assert [c.split()[1] for c in calls if c.startswith("rlrecipes") and c.split()[1] not in ("watchdog", "stage")
            ][:3] == ["resume-check", "preflight", "merge"]
    assert any(c.startswith("train") for c in calls)
    assert (ws / "reports" / "qwen2.5-3b-gsm8k-grpo-lora" / "report.md").exists()


def test_hook_stops_when_preflight_fails(pod):
    tmp_path, env = pod
    proc = _hook(env, FAIL_PREFLIGHT="1")
    assert proc.returncode == 4, proc.stderr
    assert "train failed with exit code 4" in proc.stderr
    # the watchdog runs in the background beside the stage: its call lands in the log whenever it starts
    calls = [c for c in _calls(tmp_path) if not c.startswith(("runpod", "rlrecipes watchdog", "rlrecipes stage"))]
    assert calls[-1].startswith("rlrecipes preflight") and not any(c.startswith("train") for c in calls)
    assert not (Path(env["WORKSPACE"]) / "logs" / "qwen2.5-3b-gsm8k-grpo-lora" / "train.done").exists()


def test_hook_without_auto_train_only_keeps_the_pod_reachable(pod):
    tmp_path, env = pod
    proc = _hook(env, AUTO_TRAIN="0")
    assert proc.returncode == 0, proc.stderr
    deadline = time.monotonic() + 10  # /start.sh runs in the background: give it a moment to log
    while not _calls(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _calls(tmp_path) == ["runpod /start.sh"]
    assert "AUTO_TRAIN=0: not training" in proc.stderr


@pytest.mark.parametrize(("extra", "message"), [
    ({"RECIPE": ""}, "set RECIPE"),
    ({"AUTO_TRAIN": "maybe"}, "AUTO_TRAIN must be 0 or 1"),
])
def test_hook_rejects_bad_settings(pod, extra, message):
    _, env = pod
    proc = _hook(env, **extra)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_hook_passes_shellcheck():
    shellcheck = linter("shellcheck")
    for script in ("runpod-start.sh", "ray-node.sh"):
        proc = subprocess.run([shellcheck, str(REPO / "scripts" / script)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout


# ------------------------------------------------------------------------------------------ the Hopper image
HOPPER = "docker.io/someone/rlrecipes-hopper:verl0.9.1-cu130-torch2.11.0-py3.12-runpod"
HOPPER_TEMPLATE = REPO / "deploy" / "runpod" / "hopper.json"


def test_shipped_hopper_template_runs_the_3b_recipe_on_one_h200():
    check = validate_template(load_template(HOPPER_TEMPLATE), image=HOPPER)
    assert check.env["RECIPE"] == "qwen2.5-3b-gsm8k-grpo-lora" and check.env["PROFILE"] == "h200-141gb"
    assert not [w for w in check.warnings if "tag" in w]  # the tag is the Hopper RunPod image's
    assert not [w for w in check.warnings if "GPUs" in w]  # one GPU: no multi-GPU warning
    with pytest.raises(RecipeError, match="placeholder"):
        validate_template(load_template(HOPPER_TEMPLATE))
    with pytest.raises(RecipeError, match="plain hopper image") as info:
        validate_template(load_template(HOPPER_TEMPLATE), image=HOPPER.removesuffix("-runpod"))
    assert "make build-runpod RUNPOD_IMAGE_FAMILY=hopper" in info.value.hint


@pytest.mark.parametrize(("image", "profile", "message"), [
    (HOPPER, "a100-80gb", "runs on the a100 image, but imageName is the hopper image"),
    (IMAGE, "h200-141gb", "runs on the hopper image, but imageName is the a100 image"),
])
def test_profile_must_run_on_the_template_image(shipped, image, profile, message):
    with pytest.raises(RecipeError, match=message) as info:
        validate_template(_env(shipped, "PROFILE", profile), image=image)
    assert info.value.where.endswith("env.PROFILE")


def test_p40_recipes_are_refused_on_runpod(shipped):
    template = _env(_env(shipped, "RECIPE", "qwen2.5-0.5b-gsm8k-ppo"), "PROFILE", "")
    with pytest.raises(RecipeError, match="runs on the p40 image"):
        validate_template(template, image=IMAGE)

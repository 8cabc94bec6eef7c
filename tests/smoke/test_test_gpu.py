"""`make test-gpu` / scripts/test-gpu.sh: the GPU tier runs inside an image, through Compose, with the
checkout's tests mounted and the GPU tier required. A stand-in `docker` records what it is asked to run;
the container-side script is then run by bash against a stand-in image root to show it installs pytest
once and hands the arguments to pytest."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RECORDER = """#!/usr/bin/env python3
import json, os, sys
with open(os.environ["RECORD"], "a") as fh:
    fh.write(json.dumps({"argv": sys.argv[1:], "gpus": {k: v for k, v in os.environ.items() if k.endswith("_GPUS")}}) + "\\n")
"""


def run_script(tmp_path, *args, env=()):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    docker = bin_dir / "docker"
    docker.write_text(RECORDER)
    docker.chmod(0o755)
    record = tmp_path / "record.jsonl"
    proc = subprocess.run(["scripts/test-gpu.sh", *args], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "RECORD": str(record),
                               **dict(env)})
    calls = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    return proc, calls


@pytest.mark.parametrize("family,service", [("p40", "p40-ppo"), ("a100", "a100-grpo"), ("hopper", "hopper-grpo")])
def test_runs_the_gpu_tier_in_the_image_through_compose(tmp_path, family, service):
    proc, calls = run_script(tmp_path, "-k", "smoke", env={"IMAGE_FAMILY": family, "GPUS": "2"})
    assert proc.returncode == 0, proc.stderr
    [call] = calls
    argv = call["argv"]
    assert argv[:4] == ["compose", "-f", str(REPO / "compose.yaml"), "run"]
    assert call["gpus"] == {f"{family.upper()}_GPUS": "2"}
    script_at = argv.index("-c") + 1
    assert argv[script_at - 3:script_at] == ["bash", service, "-c"]
    assert argv[script_at + 1:] == ["test-gpu", "-k", "smoke"]
    options = argv[4:script_at - 2]
    assert options[:3] == ["--rm", "--no-deps", "-T"]
    assert ["-e", "RLRECIPES_REQUIRE_GPU=1"] == options[3:5]
    assert f"{REPO / 'tests'}:/opt/rlrecipes/tests:ro" in options
    assert f"{REPO / '.cache' / 'test-gpu' / family}:/opt/pytest" in options
    assert options[-2:] == ["--entrypoint", "bash"]


def test_offline_wheels_are_mounted_and_pip_told_to_use_only_them(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    proc, [call] = run_script(tmp_path, env={"PYTEST_WHEELS": str(wheels)})
    assert proc.returncode == 0, proc.stderr
    argv = call["argv"]
    assert f"{wheels}:/opt/pytest-wheels:ro" in argv
    assert "PIP_NO_INDEX=1" in argv and "PIP_FIND_LINKS=/opt/pytest-wheels" in argv


@pytest.mark.parametrize("env,message", [
    ({"IMAGE_FAMILY": "v100"}, "IMAGE_FAMILY=v100: choose p40, a100 or hopper"),
    ({"GPUS": "device=0"}, "GPUS=device=0: use GPUS=all or a number"),
])
def test_bad_settings_fail_before_docker(tmp_path, env, message):
    proc, calls = run_script(tmp_path, env=env)
    assert proc.returncode == 2 and message in proc.stderr
    assert calls == []


def test_container_script_installs_pytest_once_and_passes_the_arguments(tmp_path):
    """The `bash -c` script, run here with the image paths pointed at a scratch root and a stand-in
    python that records its calls: pip install only when /opt/pytest lacks pytest, then pytest with
    `-m gpu tests/smoke/test_smoke_gpu.py` and the caller's arguments."""
    proc, [call] = run_script(tmp_path, "-x", "-k", "fits")
    argv = call["argv"]
    script = argv[argv.index("-c") + 1]
    root = tmp_path / "root"
    (root / "opt" / "rlrecipes").mkdir(parents=True)
    (root / "opt" / "pytest").mkdir(parents=True)
    script = script.replace("/opt/", f"{root}/opt/")
    bin_dir = tmp_path / "pybin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path}/python-calls\n"
                      f"case \"$*\" in *pip*) mkdir -p {root}/opt/pytest/_pytest ;; esac\n")
    python.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    for _ in range(2):
        done = subprocess.run(["bash", "-c", script, "test-gpu", "-x", "-k", "fits"], env=env,
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
    calls = (tmp_path / "python-calls").read_text().splitlines()
    assert calls[0] == f"-m pip install --quiet --target {root}/opt/pytest pytest>=8"
    assert len(calls) == 3  # pip once, pytest twice
    for line in calls[1:]:
        assert line.endswith("-p no:cacheprovider -m gpu tests/smoke/test_smoke_gpu.py -x -k fits")
        assert f'sys.path.append("{root}/opt/pytest")' in line

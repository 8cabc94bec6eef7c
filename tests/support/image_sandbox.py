"""An rlrecipes image without Docker, for the Slurm and RunPod simulations: what the image's Dockerfile says a
container gets (its ENV, its ENTRYPOINT), and the command line of tests/fixtures/gpuhost/sandbox that runs a
command in that image's filesystem as processes of the caller (a chroot in private namespaces, needs root).

The stand-in image is the fresh clone at /opt/rlrecipes (what the Dockerfile COPYs there) and, at /opt/venv,
the test environment's Python (the image's venv holds the same kind of packages plus verl and the GPU wheels;
the stand-in trainer replaces their work, and rlrecipes finds a CPU verl through RLRECIPES_VERL_<v>_PYTHON).
Stdlib only: the stand-in `apptainer` imports it under the system python3.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CHECKOUT = FIXTURES.parents[1]  # the checkout the tests run from (its .venvs, tests/fixtures)
SANDBOX = FIXTURES / "gpuhost" / "sandbox"
# On PYTHONPATH, puts the stand-in trainer (tests/fixtures/standin_verl) in the place of verl's main_ppo only.
STANDIN_TRAINER = FIXTURES / "standin_verl" / "hook"
# The PATH a Debian/Ubuntu base image starts with (the `${PATH}` a Dockerfile ENV extends).
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Where the sandbox puts the host's nvidia-smi for a GPU container (apptainer --nv, a RunPod GPU pod): a
# top-level directory of the sandbox's own, so nothing is written into the host's /usr.
NV_BIN = "/.standin-nv/bin"


def _instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out, pending = [], ""
    for raw in dockerfile.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def dockerfile_env(dockerfile: Path) -> dict[str, str]:
    """The ENV a container of the image's final stage starts with: every `ENV K=V ...` in order, `${VAR}`
    expanded against what came before (PATH starts as the base image's)."""
    env: dict[str, str] = {"PATH": BASE_PATH}
    for word, rest in _instructions(dockerfile):
        if word == "FROM":
            env = {"PATH": BASE_PATH}  # a new stage starts from its base
        elif word == "ENV":
            for item in shlex.split(rest):
                key, sep, value = item.partition("=")
                if not sep:
                    raise ValueError(f"{dockerfile}: ENV {rest!r}: only the KEY=VALUE form is supported")
                env[key] = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: env.get(m.group(1) or m.group(2), ""), value)
    return env


def dockerfile_entrypoint(dockerfile: Path) -> list[str]:
    entry = [rest for word, rest in _instructions(dockerfile) if word == "ENTRYPOINT"]
    if not entry:
        raise ValueError(f"{dockerfile} has no ENTRYPOINT")
    return json.loads(entry[-1])


def dockerfile_workdir(dockerfile: Path) -> str:
    workdirs = [rest for word, rest in _instructions(dockerfile) if word == "WORKDIR"]
    return workdirs[-1] if workdirs else "/"


def image_families(root: Path) -> dict[str, str]:
    """Every image tag the clone at `root` builds (rlrecipes/recipe/images.py there, loaded by path), -runpod
    variants included -> its family name."""
    spec = importlib.util.spec_from_file_location("_standin_images", root / "rlrecipes" / "recipe" / "images.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    tags = {}
    for name, image in module.IMAGES.items():
        tags[image.tag] = name
        if name in module.RUNPOD_BASES:
            tags[image.tag + module.RUNPOD_SUFFIX] = name
    return tags


def sandbox_argv(root_dir: Path, image_root: Path, venv: Path, binds: list[str], command: list[str], *,
                 nvidia_smi: str | None = None, net: bool = False, pid: bool = False,
                 chdir: str | None = None) -> list[str]:
    """The sandbox command line for `command` in the stand-in image: /opt from the image (the clone read-only
    at /opt/rlrecipes, the Python at /opt/venv), `binds` (SRC:DST[:ro]) and, for a GPU container, the host's
    nvidia-smi under NV_BIN."""
    argv = [str(SANDBOX), str(root_dir), "--tmpfs", "/opt", "--bind", f"{image_root}:/opt/rlrecipes:ro",
            "--bind", f"{venv}:/opt/venv:ro"]
    for spec in binds:
        argv += ["--bind", spec]
    # Host paths the simulation names from inside (the venvs' console-script shebangs, RLRECIPES_VERL_*_PYTHON,
    # the stand-in nvidia-smi's inventory, the stand-in trainer on PYTHONPATH) lie in this checkout: a
    # container's own /tmp (a RunPod pod, a Slurm node) would hide them when the checkout is under /tmp, as a
    # CI clone can be. Bound last, so they land inside such a /tmp; a venv elsewhere is bound too.
    for path in dict.fromkeys([CHECKOUT, Path(venv)]):
        if path == CHECKOUT or not path.is_relative_to(CHECKOUT):
            argv += ["--bind", f"{path}:{path}:ro"]
    if nvidia_smi:
        argv += ["--bind", f"{nvidia_smi}:{NV_BIN}/nvidia-smi:ro"]
    if chdir:
        argv += ["--chdir", chdir]
    if net:
        argv.append("--net")
    if pid:
        argv.append("--pid")
    return [*argv, "--", *command]


def gpu_env(env: dict[str, str]) -> dict[str, str]:
    """What a GPU gives a container, in the simulation: nvidia-smi on PATH (the stand-in, answering for
    $RLRECIPES_STANDIN_INVENTORY) and the stand-in trainer as verl's main_ppo (it records the verl command and
    writes verl-shaped checkpoints instead of training; the rest of verl stays real)."""
    env = dict(env)
    env["PATH"] = f"{NV_BIN}:{env.get('PATH', BASE_PATH)}"
    env["PYTHONPATH"] = ":".join(filter(None, [env.get("PYTHONPATH", ""), str(STANDIN_TRAINER)]))
    return env


def image_env(dockerfile_environment: dict[str, str]) -> dict[str, str]:
    """The Dockerfile's ENV, plus /opt/rlrecipes on sys.path: the image installs the project there
    (`pip install -e /opt/rlrecipes`); the stand-in /opt/venv was installed from another checkout."""
    env = dict(dockerfile_environment)
    env["PYTHONPATH"] = ":".join(filter(None, ["/opt/rlrecipes", env.get("PYTHONPATH", "")]))
    return env


def listening_ports(pid: int) -> set[int]:
    """The TCP ports something listens on in the network namespace of process `pid`."""
    ports = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


"""The GPU-host simulation: a fresh clone of this repository (no .venvs), a stand-in `nvidia-smi` answering
for a chosen GPU inventory, and the commands the README and docs tell a GPU-host user to type, taken from the
Markdown itself.

A runnable block is a fenced ```bash block right after a marker line naming the simulated hosts it is for:

    <!-- gpu-host: a100 h200 -->

Hosts: `a100` (4x A100 80GB), `p40` (1x Tesla P40 24GB), `h200` (1x H200). tests/launch/test_gpu_host.py runs each
block on each host it names, in a fresh clone, and checks what would reach the GPU.

A block for a Slurm login node is marked `<!-- slurm-cluster: HOST -->` instead (HOST: the inventory of each
node); tests/launch/test_gpu_host_slurm.py runs it against a real Slurm cluster on this machine (tests/support/slurm.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
INVENTORIES = {
    "a100": FIXTURES / "inventories" / "a100-80gb-x4.json",
    "p40": FIXTURES / "inventories" / "p40x1.json",
    "h200": FIXTURES / "inventories" / "h200-x1.json",
}
# The image family each simulated host runs (rlrecipes/recipe/images.py): Pascal gets the P40 stack, the rest the A100 one.
HOST_IMAGE = {"a100": "a100", "p40": "p40", "h200": "a100"}
DOCS = ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))]
KINDS = ("gpu-host", "slurm-cluster")


@dataclass(frozen=True)
class Block:
    doc: str
    line: int
    hosts: tuple[str, ...]
    text: str

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def doc_blocks(kind: str = "gpu-host") -> list[Block]:
    """The runnable blocks of one kind (KINDS) in README.md and docs/*.md."""
    if kind not in KINDS:
        raise ValueError(f"unknown block kind {kind!r}; kinds: {KINDS}")
    mark = re.compile(rf"^<!-- {kind}: ([a-z0-9 ]+) -->\n```bash\n(.*?)^```", re.M | re.S)
    blocks = []
    for doc in DOCS:
        text = (REPO / doc).read_text()
        for m in mark.finditer(text):
            hosts = tuple(m.group(1).split())
            unknown = set(hosts) - set(INVENTORIES)
            if unknown:
                raise ValueError(f"{doc}: unknown gpu-host {sorted(unknown)}; hosts: {sorted(INVENTORIES)}")
            blocks.append(Block(doc, text.count("\n", 0, m.start()) + 3, hosts, m.group(2)))
    return blocks


def fresh_clone(dest: Path) -> Path:
    """What `git clone` of the working tree would give (tracked and new unignored files): no .venvs, no .cache."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    assert not (dest / ".venvs").exists()
    return dest


def host_env(bin_dir: Path, host: str, docker_log: Path, home: Path, compose_bin: str | None) -> dict[str, str]:
    """The environment of a user's shell on the simulated host: stand-ins first on PATH, nothing of ours set."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for tool in ("nvidia-smi", "docker", "apptainer"):
        target = bin_dir / tool
        if not target.exists():
            target.symlink_to(FIXTURES / "gpuhost" / tool)
    keep = {k: v for k, v in os.environ.items()
            if k in ("LANG", "LC_ALL", "TMPDIR", "PIP_FIND_LINKS", "PIP_CERT", "PIP_DEFAULT_TIMEOUT",
                     "SSL_CERT_FILE", "PIP_DISABLE_PIP_VERSION_CHECK")}
    return dict(keep, PATH=f"{bin_dir}:/usr/local/bin:/usr/bin:/bin", HOME=str(home),
                RLRECIPES_STANDIN_INVENTORY=str(INVENTORIES[host]), RLRECIPES_DOCKER_LOG=str(docker_log),
                **({"RLRECIPES_COMPOSE_BIN": compose_bin} if compose_bin else {}))


# compose.yaml's GPU services and the image family each runs.
GPU_SERVICES = {"a100-grpo": "a100", "hopper-grpo": "hopper", "p40-ppo": "p40"}


def standin_gpu_override(inventory: Path | str, environment: dict[str, str]) -> str:
    """A compose file to give after compose.yaml that runs its GPU services on this CPU machine, changing only
    what a CPU machine cannot do:
    - the stand-in build of the image (rlrecipes/<family>:standin), no GPU reservation (no NVIDIA runtime here)
      and no ulimits (this sandbox may not raise memlock: runc's "error setting rlimit type 8"; a GPU host can);
    - in the GPUs' place the stand-in `nvidia-smi` answering for `inventory`, and the stand-in trainer
      (tests/fixtures/standin_verl) ahead of verl on PYTHONPATH; `environment` sets it up (STANDIN_*).
    Everything else (command, depends_on, environment, volumes, stop grace) stays as compose.yaml has it."""
    volumes = [f"{FIXTURES}/gpuhost/nvidia-smi:/usr/local/bin/nvidia-smi:ro",
               f"{inventory}:/standin/inventory.json:ro", f"{FIXTURES}/standin_verl:/standin/verl:ro"]
    env = {"RLRECIPES_STANDIN_INVENTORY": "/standin/inventory.json", "PYTHONPATH": "/standin/verl", **environment}
    lines = ["services:"]
    for name, family in GPU_SERVICES.items():
        lines += [f"  {name}:", f"    image: rlrecipes/{family}:standin", "    deploy: !reset {}",
                  "    ulimits: !reset {}", "    volumes:"]
        lines += [f"      - {v}" for v in volumes]
        lines += ["    environment:"] + [f"      {k}: {json.dumps(str(v))}" for k, v in env.items()]
    return "\n".join(lines) + "\n"


def docker_calls(log: Path) -> list[dict]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def run_option(argv: list[str], flag: str) -> list[str]:
    """Every value of a `docker run` option given as `FLAG VALUE` (before the image)."""
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]


def tiny_model(where: Path, hub_id: str = "Qwen/Qwen2.5-0.5B-Instruct") -> Path:
    """What `rlrecipes model` leaves: config.json, weights, a tokenizer with a chat template, the marker."""
    from support.tinytok import build_tokenizer

    where.mkdir(parents=True)
    build_tokenizer(where)
    (where / "config.json").write_text(json.dumps({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
                                                   "hidden_size": 64, "num_hidden_layers": 2}))
    (where / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    (where / ".rlrecipes-model.json").write_text(json.dumps({"hub_id": hub_id}) + "\n")
    return where

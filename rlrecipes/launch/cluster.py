"""The Ray cluster a launch would use: connect the way verl's `main_ppo` does, list the nodes and check
that they can hold the run's `trainer.nnodes x trainer.n_gpus_per_node` before verl starts.

verl's `run_ppo` calls `ray.init(...)` with no address, so Ray honours `RAY_ADDRESS`; with it set, verl
joins an existing cluster (`make ray-head` / `make ray-worker`, Slurm) instead of starting a private one.
The kwargs are verl's own:

- verl 0.5.x: `ray.init(runtime_env=get_ppo_ray_runtime_env(), num_cpus=config.ray_init.num_cpus)`
- verl 0.8.x: `ray.init(**config.ray_kwargs.ray_init)` with `runtime_env` merged over the PPO default

`check_cluster` calls `ray.init` with exactly those kwargs, so a setting that breaks verl's connect
breaks here first (Ray refuses `num_cpus` when joining an existing cluster). The capacity check mirrors
verl's `ResourcePoolManager._check_resource_available` (0.5.0: `nnodes` nodes each with
`n_gpus_per_node` free GPUs; 0.8.0 checks only the total, then waits forever on a placement group that
cannot be placed, so the per-node rule is the one to check).
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from rlrecipes.errors import RecipeError, StageFailed


@dataclass(frozen=True)
class NodeInfo:
    node_id: str
    ip: str
    hostname: str
    is_head: bool
    gpus: float
    gpus_free: float
    cpus: float
    cpus_free: float
    memory_bytes: float
    object_store_bytes: float


@dataclass(frozen=True)
class Requirement:
    nnodes: int
    gpus_per_node: int
    tensor_parallel: int = 1

    @property
    def gpus(self) -> int:
        return self.nnodes * self.gpus_per_node


@dataclass
class ClusterReport:
    address: str
    nodes: list[NodeInfo]
    requirement: Requirement | None
    ray_init_kwargs: dict[str, Any]
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def gpus(self) -> float:
        return sum(n.gpus for n in self.nodes)

    def as_dict(self) -> dict[str, Any]:
        return {
            "address": self.address, "ok": self.ok, "nodes": [asdict(n) for n in self.nodes],
            "gpus": self.gpus, "requirement": asdict(self.requirement) if self.requirement else None,
            "ray_init_kwargs": self.ray_init_kwargs, "problems": self.problems, "notes": self.notes,
        }

    def describe(self) -> str:
        lines = [f"Ray cluster at {self.address}: {len(self.nodes)} alive node(s), {self.gpus:g} GPU(s)"]
        lines.append(f"  {'node':<10} {'ip':<16} {'host':<20} {'GPUs free/total':>16} {'CPUs free/total':>16}"
                     f" {'object store':>13}")
        for node in self.nodes:
            role = "head" if node.is_head else "worker"
            lines.append(f"  {role + ' ' + node.node_id[:4]:<10} {node.ip:<16} {node.hostname[:20]:<20} "
                         f"{f'{node.gpus_free:g}/{node.gpus:g}':>16} {f'{node.cpus_free:g}/{node.cpus:g}':>16} "
                         f"{node.object_store_bytes / 2**30:>10.2f} GiB")
        if self.requirement:
            r = self.requirement
            lines.append(f"run needs: {r.nnodes} node(s) x {r.gpus_per_node} GPU(s) = {r.gpus} GPU(s), "
                         f"rollout TP {r.tensor_parallel}")
        lines += [f"note: {n}" for n in self.notes]
        lines += [f"FAIL: {p}" for p in self.problems]
        if self.requirement:
            lines.append("OK: the cluster can hold this run" if self.ok else "the run would not start on this cluster")
        return "\n".join(lines)


# ------------------------------------------------------------------------------------ pure logic
def requirement_for(run) -> Requirement:
    """nnodes x GPUs (and rollout TP) from the resolved run's final overrides, as verl will read them."""
    def number(key: str, default: int) -> int:
        value = run.get(key, default)
        try:
            return int(value)
        except (TypeError, ValueError):
            raise RecipeError(f"{key} must be an integer, got {value!r}", where=key) from None

    return Requirement(nnodes=number("trainer.nnodes", run.profile.nnodes),
                       gpus_per_node=number("trainer.n_gpus_per_node", run.profile.gpus_per_node),
                       tensor_parallel=number("actor_rollout_ref.rollout.tensor_model_parallel_size", 1))


def capacity_problems(nodes: list[NodeInfo], req: Requirement) -> list[str]:
    """What stops verl's global resource pool ([gpus_per_node] * nnodes) from being placed on `nodes`."""
    problems = []
    for name, value in (("trainer.nnodes", req.nnodes), ("trainer.n_gpus_per_node", req.gpus_per_node),
                        ("rollout tensor_model_parallel_size", req.tensor_parallel)):
        if value < 1:
            problems.append(f"{name} is {value}; it must be at least 1")
    if problems:
        return problems
    if req.gpus_per_node % req.tensor_parallel:
        problems.append(f"rollout tensor parallel size {req.tensor_parallel} does not divide "
                        f"trainer.n_gpus_per_node={req.gpus_per_node}: a vLLM TP group must sit inside one node")
    total_free = sum(n.gpus_free for n in nodes)
    if total_free < req.gpus:
        problems.append(f"the run needs {req.gpus} GPUs ({req.nnodes} x {req.gpus_per_node}); "
                        f"the cluster has {total_free:g} free of {sum(n.gpus for n in nodes):g}")
    # verl 0.5.0's placement rule: one bundle of n_gpus_per_node per node, on distinct nodes.
    fitting = [n for n in nodes if n.gpus_free >= req.gpus_per_node]
    if len(fitting) < req.nnodes:
        have = ", ".join(f"{n.hostname or n.ip}: {n.gpus_free:g}" for n in nodes) or "no nodes"
        problems.append(f"the run needs {req.nnodes} node(s) with >= {req.gpus_per_node} free GPUs each "
                        f"(trainer.nnodes={req.nnodes}, trainer.n_gpus_per_node={req.gpus_per_node}); "
                        f"{len(fitting)} of {len(nodes)} node(s) qualify (free GPUs per node -- {have})")
    return problems


def _verl_runtime_env(verl: str) -> tuple[dict | None, str | None]:
    from rlrecipes.verl.env import installed_verl

    if installed_verl() != verl:
        return None, (f"verl {verl} is not installed here: connecting without verl's PPO runtime_env "
                      f"(it only sets worker environment variables)")
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    return get_ppo_ray_runtime_env(), None


def ray_init_kwargs(run) -> tuple[dict[str, Any], list[str]]:
    """The kwargs verl's main_ppo passes to ray.init for this run, and notes on what differs here."""
    spec = run.image.spec
    runtime_env, note = _verl_runtime_env(spec.version)
    notes = [note] if note else []
    prefix = spec.ray_init_prefix
    if not spec.ray_init_whole_mapping:
        kwargs: dict[str, Any] = {"num_cpus": run.get(prefix + "num_cpus")}
        if runtime_env is not None:
            kwargs["runtime_env"] = runtime_env
        return kwargs, notes
    kwargs = {"num_cpus": None}  # verl's config default
    for key in run.overrides:
        bare = key.lstrip("+~")
        if not bare.startswith(prefix):
            continue
        *parents, leaf = bare[len(prefix):].split(".")
        node = kwargs
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = run.get(bare)
    user_env = kwargs.pop("runtime_env", None) or {}
    if runtime_env is not None or user_env:
        from omegaconf import OmegaConf

        merged = OmegaConf.merge(runtime_env or {}, user_env)
        kwargs["runtime_env"] = OmegaConf.to_container(merged)
    return kwargs, notes


# ------------------------------------------------------------------------------------- Ray edge
def _nodes() -> list[NodeInfo]:
    import ray

    try:  # the same view verl's resource check reads
        from ray._private.state import available_resources_per_node

        free = available_resources_per_node()
    except (ImportError, AttributeError):
        free = {}
    nodes = []
    for raw in ray.nodes():
        if not raw.get("Alive"):
            continue
        total = raw.get("Resources", {})
        avail = free.get(raw["NodeID"], total)
        nodes.append(NodeInfo(
            node_id=raw["NodeID"], ip=raw.get("NodeManagerAddress", ""),
            hostname=raw.get("NodeManagerHostname", ""), is_head="node:__internal_head__" in total,
            gpus=float(total.get("GPU", 0)), gpus_free=float(avail.get("GPU", 0)),
            cpus=float(total.get("CPU", 0)), cpus_free=float(avail.get("CPU", 0)),
            memory_bytes=float(total.get("memory", 0)), object_store_bytes=float(total.get("object_store_memory", 0)),
        ))
    return sorted(nodes, key=lambda n: (not n.is_head, n.ip, n.node_id))


def _probe(address: str, wait_s: float = 0.0, timeout: float = 5.0) -> None:
    """Fail fast on a GCS address nothing listens at (ray.init would retry for minutes); with `wait_s`,
    keep trying that long (a head that is still starting)."""
    import socket

    if address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise RecipeError(f"Ray address {address!r} is not HOST:PORT", where="RAY_ADDRESS",
                          hint="e.g. RAY_ADDRESS=10.0.0.1:6379")
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise StageFailed(f"cannot reach a Ray cluster at {address}: {exc}",
                                  hint="start one with `make ray-head` (and `make ray-worker HEAD=host:port` on "
                                       "the other hosts), or check RAY_ADDRESS and the firewall (GCS port)") from None
        time.sleep(1.0)


def _connect(address: str, kwargs: dict[str, Any], config_prefix: str, wait_s: float = 0.0) -> None:
    import ray

    _probe(address, wait_s)
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False, **kwargs)
    except ValueError as exc:
        if "existing cluster" not in str(exc):
            raise
        shown = ", ".join(f"{k}={v!r}" for k, v in kwargs.items() if k != "runtime_env")
        set_keys = [k for k, v in kwargs.items() if k != "runtime_env" and v is not None]
        raise RecipeError(
            f"verl would call ray.init({shown}) and Ray refuses that when joining the cluster at {address}: {exc}",
            where=", ".join(config_prefix + k for k in set_keys) or None,
            hint="resource settings belong to `ray start` when RAY_ADDRESS is set; add the override"
                 + "".join(f" {config_prefix}{k}=null" for k in set_keys)) from None
    except ConnectionError as exc:
        raise StageFailed(f"cannot reach a Ray cluster at {address}: {exc}",
                          hint="start one with `make ray-head` (and `make ray-worker HEAD=host:port` on the "
                               "other hosts); run this on a node of that cluster") from None


def check_cluster(run, address: str | None = None, wait_s: float = 0.0, poll_s: float = 2.0) -> ClusterReport:
    """Connect to the cluster at `address` (default: $RAY_ADDRESS) with verl's ray.init kwargs for `run`
    (None: list the cluster only) and check it can hold the run. Waits up to `wait_s` for nodes to join."""
    import ray

    address = address or os.environ.get("RAY_ADDRESS")
    if not address:
        raise RecipeError("RAY_ADDRESS is not set: verl would start a private single-node Ray instead of "
                          "joining a cluster", hint="export RAY_ADDRESS=<head host>:6379 (see `make ray-head`)")
    if run is not None:
        kwargs, notes = ray_init_kwargs(run)
        req = requirement_for(run)
        prefix = run.image.spec.ray_init_prefix
    else:
        kwargs, notes, req, prefix = {}, [], None, ""
    owned = not ray.is_initialized()
    if owned:
        _connect(address, kwargs, prefix, wait_s)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            nodes = _nodes()
            problems = capacity_problems(nodes, req) if req else []
            if not problems or time.monotonic() >= deadline:
                break
            time.sleep(poll_s)
    finally:
        if owned:
            ray.shutdown()
    return ClusterReport(address=address, nodes=nodes, requirement=req, ray_init_kwargs=kwargs,
                         problems=problems, notes=notes)

"""What every preflight check shares: the Check result, the Context a check reads (run, GPU inventory,
host facts, cached plan and memory estimate) and small helpers. Nothing here imports torch or verl."""

from __future__ import annotations

from dataclasses import dataclass, field

from rlrecipes.plan.memory import MemoryEstimate, estimate_memory
from rlrecipes.plan.plan import Plan, build_plan
from rlrecipes.preflight.host import HostFacts
from rlrecipes.preflight.inventory import Gpu, Inventory
from rlrecipes.recipe.load import ResolvedRun

PASS, WARN, FAIL = "pass", "warn", "fail"


@dataclass
class Check:
    name: str
    status: str  # pass | warn | fail
    message: str
    fix: str = ""

    def as_dict(self) -> dict:
        return {"check": self.name, "status": self.status, "message": self.message, "fix": self.fix}


@dataclass
class Context:
    run: ResolvedRun
    inventory: Inventory
    host: HostFacts
    _cache: dict = field(default_factory=dict)

    @property
    def gpu(self) -> Gpu | None:
        """The GPU that decides: the oldest (capabilities) -- checks of memory use the smallest."""
        return self.inventory.lowest_cc()

    @property
    def estimate(self) -> MemoryEstimate:
        if "estimate" not in self._cache:
            self._cache["estimate"] = estimate_memory(self.run, self.inventory.smallest())
        return self._cache["estimate"]

    @property
    def plan(self) -> Plan:
        if "plan" not in self._cache:
            self._cache["plan"] = build_plan(self.run)
        return self._cache["plan"]


def _cc_text(cc: tuple[int, int]) -> str:
    return f"sm_{cc[0]}{cc[1]}"


def _engine(run: ResolvedRun) -> str:
    return str(run.get("actor_rollout_ref.rollout.name", run.profile.rollout))


def _no_gpu(name: str, ctx: Context) -> Check | None:
    if ctx.inventory.gpus:
        return None
    return Check(name, WARN, "not checked: no GPU inventory", "see the gpu-inventory check")


def _cc_known(name: str, ctx: Context) -> Check | None:
    skip = _no_gpu(name, ctx)
    if skip:
        return skip
    if ctx.gpu is None:
        return Check(name, WARN, "not checked: the GPUs' compute capability is unknown",
                     "pass --gpu-inventory FILE.json with compute_capability, or update the driver")
    return None

"""The preflight checks: each a function of (ResolvedRun, Inventory, HostFacts) returning Check(s) with
pass / warn / fail, a one-line reason and the fix. Capability rules are data (the tables below) that
the detected inventory is checked against; nothing here imports torch or verl.

By concern: gpu.py, host.py, model.py (model and data), tracking.py; base.py holds Check and
Context. Model, data and checkpoint checks read the run's own directories (they are what is being checked);
everything about the host comes in through HostFacts.
"""

from __future__ import annotations

from collections.abc import Callable

from rlrecipes.preflight.checks.base import FAIL, PASS, WARN, Check, Context
from rlrecipes.preflight.checks.gpu import (check_attention, check_compute_dtype, check_driver, check_gpu_count,
                                            check_gpu_inventory, check_gpu_memory, check_image_arch,
                                            check_rollout_engine, check_tensor_parallel, check_triton)
from rlrecipes.preflight.checks.host import check_disk, check_host_ram, check_ports, check_shm, check_ulimits
from rlrecipes.preflight.checks.model import check_chat_template, check_data, check_model, check_prompt_length
from rlrecipes.preflight.checks.tracking import check_resume_world_size, check_tracker, check_tracking, offline_env
from rlrecipes.preflight.host import HostFacts
from rlrecipes.preflight.inventory import Inventory
from rlrecipes.recipe.load import ResolvedRun

__all__ = ["CHECKS", "CHECK_NAMES", "FAIL", "PASS", "WARN", "Check", "Context", "offline_env", "run_checks"]

CHECKS: list[tuple[str, Callable[[Context], Check]]] = [
    ("gpu-inventory", check_gpu_inventory),
    ("gpu-count", check_gpu_count),
    ("tensor-parallel", check_tensor_parallel),
    ("driver", check_driver),
    ("image-arch", check_image_arch),
    ("compute-dtype", check_compute_dtype),
    ("attention", check_attention),
    ("rollout-engine", check_rollout_engine),
    ("triton", check_triton),
    ("gpu-memory", check_gpu_memory),
    ("disk", check_disk),
    ("shm", check_shm),
    ("host-ram", check_host_ram),
    ("ulimits", check_ulimits),
    ("ports", check_ports),
    ("model", check_model),
    ("chat-template", check_chat_template),
    ("data", check_data),
    ("prompt-length", check_prompt_length),
    ("tracking", check_tracking),
    ("tracker", check_tracker),
    ("resume-world-size", check_resume_world_size),
]
CHECK_NAMES = [name for name, _ in CHECKS]


def run_checks(run: ResolvedRun, inventory: Inventory, host: HostFacts, only: list[str] | None = None,
               context: Context | None = None) -> list[Check]:
    ctx = context or Context(run, inventory, host)
    out = []
    for name, func in CHECKS:
        if only and name not in only:
            continue
        try:
            out.append(func(ctx))
        except Exception as exc:  # a bug in one check must not hide the others
            out.append(Check(name, WARN, f"check could not run: {type(exc).__name__}: {exc}",
                             "please report it with `rlrecipes env`"))
    return out

"""Preflight doctor: predict, in seconds and before anything loads, how a run would die.

    from rlrecipes.preflight import run_preflight
    report = run_preflight(run, inventory, host)        # -> list[Check]

Checks are pure functions of (ResolvedRun, Inventory, HostFacts) (checks.py); the GPU inventory
(inventory.py: NVML, nvidia-smi or a JSON file) and the host facts (host.py: disk, /dev/shm, RAM,
ulimits, wandb credentials) are gathered at the edge, so tests inject them. Never imports torch or verl.
"""

from rlrecipes.preflight.checks import Check, run_checks
from rlrecipes.preflight.host import HostFacts, gather_host_facts
from rlrecipes.preflight.inventory import Gpu, Inventory, detect_inventory, load_inventory

__all__ = ["Check", "Gpu", "HostFacts", "Inventory", "detect_inventory", "gather_host_facts", "load_inventory",
           "run_checks"]

"""Disk-quota watchdog for verl checkpoints: retention, a disk budget, and a resume tracker that is valid.

Runs as a sidecar beside the trainer (docker/watchdog.Dockerfile), or once before a launch
(`rlrecipes resume-check`). Imports only the standard library so its image stays small.

Public API for other stages (preflight):
    resume_check(root, repair=True, grace_s=0.0) -> list[Finding]
"""

from rlrecipes.watchdog.policy import Finding
from rlrecipes.watchdog.runner import Watchdog, WatchdogConfig, default_status_path, resume_check

__all__ = ["Finding", "Watchdog", "WatchdogConfig", "default_status_path", "resume_check"]

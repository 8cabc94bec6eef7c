"""Disk-quota watchdog for verl checkpoints: retention, a disk budget, and a resume tracker that is valid.

Runs as a sidecar beside the trainer (docker/watchdog.Dockerfile), or once before a launch
(`rlrecipes resume-check`). Imports only the standard library so its image stays small.

The resume tracker's rules and `resume_check` live with verl's checkpoint layout (rlrecipes/verl/resume.py),
where preflight reads them too; they are re-exported here for the watchdog's callers.
"""

from rlrecipes.verl.resume import Finding, resume_check
from rlrecipes.watchdog.runner import Watchdog, WatchdogConfig, default_status_path

__all__ = ["Finding", "Watchdog", "WatchdogConfig", "default_status_path", "resume_check"]

"""Is the run still making progress? Training steps read from its logs, incrementally (stdlib only).

verl logs one line per training step: the file logger's JSONL (`{"step": N, "data": {...}}`) and the
console logger (`step:N - key:value - ...`, possibly behind Ray's `(TaskRunner pid=7) ` prefix), both read
by rlrecipes.verl.logs. A run
whose highest step stops growing for longer than the stall limit is stalled: hung in its rollout engine,
in a collective, or on a dead node -- alive, holding the GPUs, training nothing. (On an H200, verl 0.9.1
hit an error in its rollout engine and then hung for minutes without exiting.)

The limit is set by hand (`--stall-after S`) or derived from the run's own step times (`timing_s/step`,
logged by verl for every step): STALL_FACTOR x the median of the recent ones plus STALL_SLACK_S, never
below STALL_FLOOR_S (validation and checkpoint saves make some steps much longer than the median).
Before the first step the start-up limit applies (`--stall-startup`: imports, Ray, model loading).

A rollout engine that died is a stall at once, whatever the limit: vLLM logs `EngineDeadError` when its engine
process is gone, and verl 0.9.1 then waits on it for good (its engine killed during a weight sync on an H200: the
error logged, no step for as long as it was watched; docs/bench/gpu-reliability.md). The line must come after
the last step of its log file, and a newer log file (a relaunch) clears it.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from rlrecipes.verl.logs import parse_console_line, parse_jsonl_record

STALL_FACTOR = 5.0
STALL_SLACK_S = 300.0
STALL_FLOOR_S = 900.0
DEFAULT_STARTUP_S = 3600.0
LOG_PATTERNS = ("*.jsonl", "console*.log", "*.log")
MAX_LINE = 1 << 20  # a longer "line" is not a step line: skipped
# Lines after which the run never logs another step (the exception's name as Python prints it: `Name: message`).
DEAD_ENGINE = re.compile(r"\bEngineDeadError:")  # vllm.v1.engine.exceptions.EngineDeadError
RELAUNCH_FILES = ("console-", "metrics-")  # each launch opens its own (train.sh, recipe/render.py): a relaunch


@dataclass
class _File:
    offset: int = 0
    inode: int = 0
    partial: bytes = b""
    step: int | None = None  # highest step in this file
    seen_at: float | None = None  # when it first appeared
    created: float | None = None  # its mtime when first read: a relaunch's file is newer than the line it clears
    dead: tuple[float, str] | None = None  # (when, the line): a dead engine logged after this file's last step


@dataclass
class Progress:
    """What the logs say so far: the highest step, when it was first seen, recent step times."""

    paths: list[Path]
    stall_after_s: float | None = None  # None: derived from the step times
    startup_s: float = DEFAULT_STARTUP_S
    total_steps: int | None = None  # a run whose logged step reached this is finished, not stalled
    step: int | None = None
    step_seen_at: float | None = None  # watchdog clock when `step` first appeared (or the file's mtime)
    started_at: float | None = None
    step_times: list[float] = field(default_factory=list)
    _files: dict[str, _File] = field(default_factory=dict)

    def files(self) -> list[Path]:
        found: list[Path] = []
        for path in self.paths:
            if path.is_file():
                found.append(path)
            elif path.is_dir():
                # the directory and two levels below: $LOG_DIR holds one directory per run, a seed's runs
                # (`rlrecipes reproduce --seed N`) sit in LOG_DIR/seed-N/<run>
                found += [p for pattern in LOG_PATTERNS for glob in (pattern, f"*/{pattern}", f"*/*/{pattern}")
                          for p in sorted(path.glob(glob)) if p.is_file()]
        return sorted(set(found))

    def update(self, now: float) -> None:
        if self.started_at is None:
            self.started_at = now
        for path in self.files():
            self._read(path, now)

    def _read(self, path: Path, now: float) -> None:
        try:
            st = path.stat()
        except OSError:
            return
        state = self._files.setdefault(str(path), _File())
        if st.st_ino != state.inode or st.st_size < state.offset:  # a new file, or truncated (verl's "wb")
            state.offset, state.inode, state.partial, state.step, state.dead = 0, st.st_ino, b"", None, None
            state.created = st.st_mtime  # a file is dated by its mtime when first read, as its lines are
        if st.st_size == state.offset:
            return
        first_read = state.offset == 0  # what was there before: dated by the file, not by this pass
        try:
            with open(path, "rb") as fh:
                fh.seek(state.offset)
                chunk = fh.read(st.st_size - state.offset)
        except OSError:
            return
        state.offset += len(chunk)
        lines = (state.partial + chunk).split(b"\n")
        state.partial = lines.pop()[-MAX_LINE:]
        for raw in lines:
            if len(raw) <= MAX_LINE:
                self._line(state, raw.decode("utf-8", errors="replace"), st.st_mtime if first_read else now)

    def _line(self, state: _File, text: str, seen_at: float) -> None:
        stripped = text.strip()
        if stripped.startswith("{"):
            try:
                step, metrics = parse_jsonl_record(stripped)
            except (ValueError, KeyError, TypeError):
                return
        else:
            parsed = parse_console_line(stripped)
            if parsed is None:
                if DEAD_ENGINE.search(stripped) and state.dead is None:
                    state.dead = (seen_at, stripped[-300:])
                return
            step, metrics = parsed
        state.dead = None  # a step after it: whatever died came back
        seconds = metrics.get("timing_s/step")  # verl logs it for every training step
        if seconds is not None and 0 < seconds < 1e7:
            self.step_times = (self.step_times + [seconds])[-20:]
        # Progress is per file: each launch (and each run, when a directory holds several) logs to its own
        # file, so a relaunch that resumes below an older file's last step still counts as progress.
        if state.step is None or step > state.step:
            state.step, state.seen_at = step, seen_at
            if (self.step_seen_at is None or seen_at > self.step_seen_at
                    or (seen_at == self.step_seen_at and step > self.step)):
                self.step, self.step_seen_at = step, seen_at

    def limit_s(self) -> float:
        if self.step is None:
            return self.startup_s
        if self.stall_after_s is not None:
            return self.stall_after_s
        if not self.step_times:
            return self.startup_s
        return max(STALL_FLOOR_S, STALL_FACTOR * statistics.median(self.step_times) + STALL_SLACK_S)

    def dead_engine(self) -> dict | None:
        """The newest log file's dead-engine line, unless a newer file (a relaunch) has appeared since."""
        dead = [(path, f.dead) for path, f in self._files.items() if f.dead is not None]
        if not dead:
            return None
        path, (at, line) = max(dead, key=lambda item: item[1][0])
        if any((f.created or 0.0) > at for p, f in self._files.items()
               if p != path and Path(p).name.startswith(RELAUNCH_FILES)):
            return None
        return {"at": at, "file": path, "line": line}

    def verdict(self, now: float) -> tuple[bool, str, dict]:
        """(stalled, message, facts for the status file)."""
        since = self.step_seen_at if self.step is not None else self.started_at
        quiet = max(0.0, now - since) if since is not None else 0.0
        limit = self.limit_s()
        facts = {"step": self.step, "quiet_s": round(quiet, 1), "limit_s": round(limit, 1),
                 "median_step_s": round(statistics.median(self.step_times), 3) if self.step_times else None,
                 "files": [str(p) for p in self.files()][:20]}
        facts["finished"] = self.total_steps is not None and self.step is not None and self.step >= self.total_steps
        facts["dead_engine"] = dead = self.dead_engine()
        if dead and not facts["finished"]:
            return True, (f"the rollout engine died {max(0.0, now - dead['at']):.0f}s ago, after step {self.step} "
                          f"(EngineDeadError in {Path(dead['file']).name}): verl waits on it for good; the run is "
                          "stalled and holds its GPUs"), facts
        if quiet <= limit or facts["finished"]:
            return False, "", facts
        if self.step is None:
            return True, (f"no training step logged {quiet:.0f}s after the watchdog started following the run "
                          f"(start-up limit {limit:.0f}s)"), facts
        how = "set by hand" if self.stall_after_s is not None else (
            f"{STALL_FACTOR:g} x the median step time {facts['median_step_s']}s + {STALL_SLACK_S:.0f}s"
            if self.step_times else "start-up limit: no step time logged")
        return True, (f"no new training step for {quiet:.0f}s (last: step {self.step}); limit {limit:.0f}s ({how}): "
                      "the run is stalled and holds its GPUs"), facts


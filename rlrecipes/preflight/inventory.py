"""The GPU inventory the checks consult: detected through NVML (nvidia-ml-py), else parsed from
`nvidia-smi --query-gpu`, or read from a JSON file for what-if planning ("will this fit on 2x A100 40GB?").

JSON inventory (keys are strict; `count` repeats an entry):

    {"gpus": [{"name": "Tesla P40", "memory_mib": 24576, "compute_capability": "6.1"}],
     "driver_version": "535.183.01", "cuda_driver_version": "12.2"}
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from rlrecipes.errors import RecipeError

SMI_FIELDS = "index,name,memory.total,compute_cap,driver_version,uuid"
# Drivers older than 510 cannot report compute_cap; these names cover the cards people still run.
CC_BY_NAME = {
    "tesla p40": "6.1", "tesla p100": "6.0", "tesla p4": "6.1", "tesla v100": "7.0", "tesla t4": "7.5",
    "quadro rtx": "7.5", "geforce gtx 1080": "6.1", "geforce rtx 2080": "7.5", "geforce rtx 3090": "8.6",
    "a100": "8.0", "a10": "8.6", "a40": "8.6", "l4": "8.9", "l40": "8.9", "h100": "9.0", "h200": "9.0",
}


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    memory_mib: int
    compute_capability: str | None  # "8.0"; None when it could not be read
    uuid: str | None = None

    @property
    def cc(self) -> tuple[int, int] | None:
        if not self.compute_capability:
            return None
        major, _, minor = self.compute_capability.partition(".")
        return int(major), int(minor or 0)

    @property
    def sm(self) -> str:
        return "sm_" + self.compute_capability.replace(".", "") if self.compute_capability else "sm_?"

    @property
    def memory_gib(self) -> float:
        return self.memory_mib / 1024


@dataclass
class Inventory:
    gpus: list[Gpu] = field(default_factory=list)
    driver_version: str | None = None
    cuda_driver_version: str | None = None  # newest CUDA the driver supports, e.g. "12.8"
    source: str = "none"  # "nvml" | "nvidia-smi" | "file:<path>" | "none"
    error: str = ""  # why nothing was detected

    @property
    def count(self) -> int:
        return len(self.gpus)

    def smallest(self) -> Gpu | None:
        return min(self.gpus, key=lambda g: g.memory_mib) if self.gpus else None

    def lowest_cc(self) -> Gpu | None:
        known = [g for g in self.gpus if g.cc is not None]
        return min(known, key=lambda g: g.cc) if known else None

    def describe(self) -> str:
        if not self.gpus:
            return "no GPU"
        kinds: dict[tuple, int] = {}
        for g in self.gpus:
            key = (g.name, g.memory_mib, g.compute_capability)
            kinds[key] = kinds.get(key, 0) + 1
        parts = [f"{n}x {name} ({mib / 1024:.0f} GiB, sm_{(cc or '?').replace('.', '')})"
                 for (name, mib, cc), n in kinds.items()]
        driver = f", driver {self.driver_version}" if self.driver_version else ""
        return " + ".join(parts) + driver

    def as_dict(self) -> dict:
        return {"source": self.source, "driver_version": self.driver_version,
                "cuda_driver_version": self.cuda_driver_version, "error": self.error,
                "gpus": [{"index": g.index, "name": g.name, "memory_mib": g.memory_mib,
                          "compute_capability": g.compute_capability} for g in self.gpus]}


def cc_from_name(name: str) -> str | None:
    lowered = name.lower()
    for key in sorted(CC_BY_NAME, key=len, reverse=True):
        if key in lowered:
            return CC_BY_NAME[key]
    return None


# ----------------------------------------------------------------------------------------- JSON
def load_inventory(path: str | Path) -> Inventory:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecipeError("GPU inventory file not found", where=str(path)) from None
    except ValueError as exc:
        raise RecipeError(f"malformed JSON: {exc}", where=str(path)) from None
    return inventory_from_dict(data, where=str(path))


def inventory_from_dict(data: object, where: str = "inventory") -> Inventory:
    if not isinstance(data, dict):
        raise RecipeError("a GPU inventory is a JSON object with a 'gpus' list", where=where)
    allowed = {"gpus", "driver_version", "cuda_driver_version", "comment"}
    for key in data:
        if key not in allowed:
            raise RecipeError(f"unknown key '{key}'", where=f"{where}: {key}", hint=f"valid keys: {', '.join(sorted(allowed))}")
    gpus_raw = data.get("gpus")
    if not isinstance(gpus_raw, list):
        raise RecipeError("'gpus' must be a list of {name, memory_mib, compute_capability}", where=f"{where}: gpus")
    gpus: list[Gpu] = []
    for i, item in enumerate(gpus_raw):
        at = f"{where}: gpus[{i}]"
        if not isinstance(item, dict):
            raise RecipeError("expected an object", where=at)
        for key in item:
            if key not in ("name", "memory_mib", "compute_capability", "count"):
                raise RecipeError(f"unknown key '{key}'", where=f"{at}.{key}",
                                  hint="valid keys: name, memory_mib, compute_capability, count")
        for key in ("name", "memory_mib", "compute_capability"):
            if key not in item:
                raise RecipeError(f"missing required key '{key}'", where=at)
        memory = item["memory_mib"]
        if isinstance(memory, bool) or not isinstance(memory, int) or memory <= 0:
            raise RecipeError(f"memory_mib must be a positive integer (MiB), got {memory!r}", where=f"{at}.memory_mib")
        cc = str(item["compute_capability"])
        major, dot, minor = cc.partition(".")
        if not (major.isdigit() and dot and minor.isdigit()):
            raise RecipeError(f"compute_capability must look like '8.0', got {cc!r}", where=f"{at}.compute_capability")
        count = item.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise RecipeError(f"count must be a positive integer, got {count!r}", where=f"{at}.count")
        for _ in range(count):
            gpus.append(Gpu(len(gpus), str(item["name"]), memory, cc))
    driver = data.get("driver_version")
    cuda = data.get("cuda_driver_version")
    return Inventory(gpus, str(driver) if driver is not None else None, str(cuda) if cuda is not None else None,
                     source=f"file:{where}")


# ----------------------------------------------------------------------------------------- NVML
def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def from_nvml() -> Inventory:
    """Read the GPUs through NVML. Raises OSError/ImportError-like errors when NVML is unavailable."""
    import pynvml  # nvidia-ml-py

    pynvml.nvmlInit()
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        cuda = None
        try:
            raw = pynvml.nvmlSystemGetCudaDriverVersion_v2()
            cuda = f"{raw // 1000}.{raw % 1000 // 10}"
        except pynvml.NVMLError:
            pass
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = _text(pynvml.nvmlDeviceGetName(handle))
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024)
            try:
                major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
                cc = f"{major}.{minor}"
            except pynvml.NVMLError:
                cc = cc_from_name(name)
            gpus.append(Gpu(i, name, int(memory), cc, _text(pynvml.nvmlDeviceGetUUID(handle))))
        return Inventory(gpus, driver, cuda, source="nvml")
    finally:
        pynvml.nvmlShutdown()


# ----------------------------------------------------------------------------------- nvidia-smi
def parse_smi_csv(text: str, with_cc: bool = True) -> tuple[list[Gpu], str | None]:
    """Parse `nvidia-smi --query-gpu=index,name,memory.total[,compute_cap],driver_version[,uuid]
    --format=csv,noheader,nounits` output."""
    gpus, driver = [], None
    base = 5 if with_cc else 4
    for line_no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) not in (base, base + 1):
            raise ValueError(f"line {line_no}: expected {base} or {base + 1} comma-separated fields, got {line!r}")
        index, name, memory = int(cells[0]), cells[1], int(float(cells[2]))
        cc = cells[3] if with_cc else cc_from_name(name)
        if cc in ("[N/A]", "N/A", ""):
            cc = cc_from_name(name)
        driver = cells[base - 1]
        uuid = cells[base] if len(cells) > base else None
        gpus.append(Gpu(index, name, memory, cc, uuid))
    return gpus, driver


def visible(inventory: Inventory, cuda_visible_devices: str | None) -> Inventory:
    """The GPUs a CUDA process will see: NVML and nvidia-smi list every GPU of the container, while
    torch/Ray only use those in CUDA_VISIBLE_DEVICES (indices or GPU UUIDs; an invalid entry hides
    it and all after it, as the CUDA runtime does)."""
    if cuda_visible_devices is None:
        return inventory
    chosen: list[Gpu] = []
    for item in [x.strip() for x in cuda_visible_devices.split(",")]:
        match = None
        if item.lstrip("-").isdigit():
            match = next((g for g in inventory.gpus if g.index == int(item)), None)
        elif item:
            match = next((g for g in inventory.gpus if g.uuid and g.uuid.startswith(item)), None)
        if match is None or match in chosen:
            break
        chosen.append(match)
    gpus = [Gpu(i, g.name, g.memory_mib, g.compute_capability, g.uuid) for i, g in enumerate(chosen)]
    note = f"CUDA_VISIBLE_DEVICES={cuda_visible_devices!r} leaves {len(gpus)} of {inventory.count} GPU(s)"
    return Inventory(gpus, inventory.driver_version, inventory.cuda_driver_version, inventory.source,
                     "; ".join(filter(None, [inventory.error, note])))


def from_nvidia_smi(smi: str = "nvidia-smi", timeout: float = 20) -> Inventory:
    def query(fields: str) -> subprocess.CompletedProcess:
        return subprocess.run([smi, f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=timeout)

    proc = query(SMI_FIELDS)
    with_cc = True
    if proc.returncode != 0 and "compute_cap" in (proc.stdout + proc.stderr):
        # drivers before ~510 do not know the compute_cap field
        proc, with_cc = query(SMI_FIELDS.replace(",compute_cap", "")), False
    if proc.returncode != 0:
        raise OSError(f"{smi} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()[:200]}")
    gpus, driver = parse_smi_csv(proc.stdout, with_cc=with_cc)
    return Inventory(gpus, driver, None, source="nvidia-smi")


def detect_inventory(env: dict[str, str] | None = None) -> Inventory:
    """The GPUs CUDA processes here will see: CUDA_VISIBLE_DEVICES applied to what NVML (else
    nvidia-smi) lists."""
    env = os.environ if env is None else env
    return visible(_detect(), env.get("CUDA_VISIBLE_DEVICES"))


def _detect() -> Inventory:
    """NVML first, then nvidia-smi; an empty inventory with the reasons when neither works."""
    reasons = []
    try:
        inv = from_nvml()
        if inv.gpus:
            return inv
        reasons.append("NVML found no GPU")
    except ImportError:
        reasons.append("nvidia-ml-py (pynvml) is not installed")
    except Exception as exc:  # pynvml.NVMLError_LibraryNotFound and friends
        reasons.append(f"NVML unavailable ({type(exc).__name__}: {exc})")
    smi = shutil.which("nvidia-smi")
    if smi is None:
        reasons.append("nvidia-smi is not on PATH")
    else:
        try:
            inv = from_nvidia_smi(smi)
            if inv.gpus:
                return inv
            reasons.append("nvidia-smi listed no GPU")
        except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
            reasons.append(str(exc))
    return Inventory([], source="none", error="; ".join(reasons))

#!/usr/bin/env python3
"""Show what fails without the P40 patch: launch a smoke recipe against a verl copy with some (or
all) patch sites left as released, and report the first error each launch hits.

    python3 benchmarks/gpu/p40_unpatched_failures.py --assets A --work W \
        pristine:smoke-ppo:/tmp/w/verl-pristine  no-critic-attn:smoke-ppo:/tmp/w/verl-nca ...

Each VARIANT is NAME:RECIPE:DIR where DIR holds a `verl` package (put first on PYTHONPATH). All
variants run at once. Prints one block per variant and writes W/demos.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from rlrecipes.recipe.load import resolve  # noqa: E402
from rlrecipes.smoke.assets import build_assets  # noqa: E402
from rlrecipes.smoke.run import launch  # noqa: E402
from rlrecipes.verl.logs import parse_steps  # noqa: E402

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# "SomeError: message" at the start of a line (after Ray's "(Actor pid=N)" prefix): the root causes,
# not the RayTaskError wrappers that repeat them.
_ERROR = re.compile(r"^\s*(?:\(\w+ pid=\d+\)\s*)?((?:[\w.]+\.)?\w*(?:Error|Exception): .*)$")
_WRAPPERS = ("RayTaskError", "ActorDiedError", "RayActorError", "Error executing job")


def first_errors(text: str, limit: int = 4) -> list[str]:
    seen: list[str] = []
    for line in _ANSI.sub("", text).splitlines():
        match = _ERROR.search(line)
        if not match or any(w in line for w in _WRAPPERS):
            continue
        msg = match.group(1).strip()[:300]
        if msg not in seen:
            seen.append(msg)
        if len(seen) >= limit:
            break
    return seen


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--assets", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=240)
    parser.add_argument("variants", nargs="+")
    args = parser.parse_args()
    assets = build_assets(args.assets)
    results: dict[str, dict] = {}

    def one(spec: str) -> None:
        name, recipe, verl_dir = spec.split(":", 2)
        env = dict(os.environ)
        env.update({"MODELS_DIR": assets["models_dir"], "DATA_DIR": assets["data_dir"],
                    "CKPT_DIR": str(args.work / name / "checkpoints"), "LOG_DIR": str(args.work / name / "logs"),
                    "RAY_DEDUP_LOGS": "0", "PYTHONUNBUFFERED": "1", "RAY_ADDRESS": "local",
                    "REWARD_FN": str(REPO / "rlrecipes" / "smoke" / "reward.py")})
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [verl_dir, str(REPO), env.get("PYTHONPATH")]))
        run = resolve(recipe, env=env)
        cmd = [sys.executable, "-m", "verl.trainer.main_ppo", *run.hydra_overrides()]
        result = launch(cmd, env, run.log_dir / "console.log", None, args.timeout, echo=None)
        results[name] = {"recipe": recipe, "verl": verl_dir, "rc": result.rc, "timed_out": result.timed_out,
                         "steps_logged": sorted(parse_steps(result.text)), "seconds": round(result.seconds, 1),
                         "first_errors": first_errors(result.text), "console": str(result.console)}

    threads = [threading.Thread(target=one, args=(spec,)) for spec in args.variants]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (args.work / "demos.json").write_text(json.dumps(results, indent=2) + "\n")
    for name, res in results.items():
        print(f"== {name} ({res['recipe']}): exit {res['rc']}, steps {res['steps_logged']}, {res['seconds']} s")
        for err in res["first_errors"]:
            print(f"   {err}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

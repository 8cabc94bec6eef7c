"""Write (or --check) rlrecipes/verl/schema/verl-<version>.json: the keys of the composed `ppo_trainer`
config of each pinned verl, taken from the real verl (`python -m rlrecipes.verl.check --schema` in that
version's interpreter: .venvs/verl-<version> from `make envs`, or RLRECIPES_VERL_<V>_PYTHON).
`rlrecipes plan` checks override keys against them without importing verl (rlrecipes/verl/schema.py).

    python scripts/verl_schema.py            # regenerate every snapshot (make verl-schema)
    python scripts/verl_schema.py --check    # exit 1 naming each stale or missing one
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rlrecipes.fsutil import atomic_write_text  # noqa: E402
from rlrecipes.verl.env import python_for  # noqa: E402
from rlrecipes.verl.schema import Schema, snapshot_path  # noqa: E402
from rlrecipes.verl.specs import SPECS  # noqa: E402


def generate(version: str, timeout: float = 300) -> str:
    """The snapshot text of verl `version`, from its own interpreter."""
    python = python_for(version)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([str(python), "-m", "rlrecipes.verl.check", "--schema"], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO)
    if proc.returncode != 0:
        raise RuntimeError(f"{python} -m rlrecipes.verl.check --schema exited {proc.returncode}: "
                           f"{(proc.stderr.strip().splitlines() or ['no output'])[-1]}")
    found = Schema.from_json(proc.stdout).verl
    if found != version:
        raise RuntimeError(f"{python} has verl {found}, not {version}")
    return proc.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a snapshot is stale or missing")
    args = parser.parse_args(argv)
    stale = []
    for version in SPECS:
        text, path = generate(version), snapshot_path(version)
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if text == current:
            continue
        if args.check:
            stale.append(str(path.relative_to(REPO)))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
        print(f"wrote {path.relative_to(REPO)}")
    if stale:
        print(f"stale: {', '.join(stale)} (regenerate with: make verl-schema)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Validate resolved runs against the real verl their image pins (see rlrecipes.verl.check).

One subprocess per verl version validates any number of runs, so `make test` validating every
recipe x profile pays verl's import cost once per version.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from typing import Any

from rlrecipes.errors import EnvironmentMissing
from rlrecipes.paths import repo_root
from rlrecipes.recipe.load import ResolvedRun
from rlrecipes.verl.env import python_for


@dataclass
class Validation:
    run: ResolvedRun
    ok: bool
    verl: str
    kind: str = ""
    key: str | None = None
    message: str = ""
    detail: str = ""
    suggestions: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    config: dict[str, Any] | None = None

    def describe(self) -> str:
        label = f"{self.run.name} on {self.run.profile.name} (verl {self.verl})"
        if self.ok:
            return f"OK    {label}"
        text = f"FAIL  {label}\n      {self.message}"
        if self.key:
            source = self.run.sources.get(self.key.lstrip("+~"))
            if source:
                text += f"\n      set by: {source}"
        if self.suggestions:
            text += f"\n      did you mean: {', '.join(self.suggestions)}"
        return text


def validate_runs(runs: list[ResolvedRun], timeout: float = 300) -> list[Validation]:
    by_version: dict[str, list[int]] = {}
    for index, run in enumerate(runs):
        by_version.setdefault(run.image.verl, []).append(index)
    results: list[Validation | None] = [None] * len(runs)
    for version, indices in by_version.items():
        python = python_for(version)
        request = {"jobs": [{"id": i, "overrides": runs[i].hydra_overrides()} for i in indices]}
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(repo_root()),
                                                                        os.environ.get("PYTHONPATH")])),
                   RAY_DEDUP_LOGS="0", HYDRA_FULL_ERROR="1")
        hint = f"point it at the python of an environment with verl {version} (make envs builds one)"
        try:
            proc = subprocess.run([str(python), "-m", "rlrecipes.verl.check"], input=json.dumps(request),
                                  capture_output=True, text=True, timeout=timeout, env=env, cwd=repo_root())
        except OSError as exc:  # not a program at all (ENOEXEC, EACCES, ...)
            raise EnvironmentMissing(f"cannot run the verl {version} interpreter: {exc.strerror}",
                                     where=str(python), hint=hint) from None
        try:
            answer = json.loads(proc.stdout.strip().splitlines()[-1])
            found = {answer.get("verl"), *(item.get("verl") for item in answer["results"])}
        except (ValueError, IndexError, KeyError, TypeError, AttributeError):
            # No JSON answer: the interpreter is not a Python that can import rlrecipes and verl.
            last = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["no output"])[-1]
            raise EnvironmentMissing(f"not a working Python with verl {version} (exit {proc.returncode}: "
                                     f"{last[:200]})", where=str(python), hint=hint) from None
        wrong = sorted(v for v in found if v and v != version)
        if wrong:
            # A schema error from the wrong verl would read as a mistake in the recipe.
            raise EnvironmentMissing(f"this interpreter has verl {wrong[0]}, not {version}", where=str(python),
                                     hint=hint)
        for item in answer["results"]:
            i = item["id"]
            results[i] = Validation(
                run=runs[i], ok=item["ok"], verl=item.get("verl", version), kind=item.get("kind", ""),
                key=item.get("key"), message=item.get("message", ""), detail=item.get("detail", ""),
                suggestions=item.get("suggestions", []), notices=item.get("notices", []),
                config=item.get("config"),
            )
    return [r for r in results if r is not None]

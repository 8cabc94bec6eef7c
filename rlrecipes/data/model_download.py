"""A recipe's base model at MODELS_DIR/<hub id basename>, with the hub client (`rlrecipes model RECIPE`).

Online: `huggingface_hub.snapshot_download(hub_id, local_dir=target)` (resumable, skips files already there;
the token huggingface_hub finds -- HF_TOKEN, else the one `hf auth login` saved -- is sent for gated/private
models). Offline (huggingface_hub's own switch: `HF_HUB_OFFLINE=1` or `TRANSFORMERS_OFFLINE=1`): nothing
touches the network; the model is taken from the target if it is already complete, else copied out of the
Hugging Face cache (HF_HOME/hub), else a clear error says where it looked and how to fix it.

A target counts as complete when it has config.json and weights (*.safetensors or *.bin) and the marker
`.rlrecipes-model.json` written last, after a successful download: an interrupted download is retried, never
mistaken for a model.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from typing import TYPE_CHECKING

from rlrecipes.errors import RecipeError, StageFailed
from rlrecipes.fsutil import atomic_write_text

if TYPE_CHECKING:
    from rlrecipes.recipe.load import ResolvedRun

MARKER = ".rlrecipes-model.json"
# Weights only as safetensors where the hub has them: the .bin/.pth/.h5 twins of the same weights double
# the download for nothing. (A repo with only .bin files still downloads them: see _allow_patterns.)
IGNORE_PATTERNS = ["*.pth", "*.pt", "*.h5", "*.msgpack", "*.ot", "original/*", "onnx/*"]


def assets_command(run: ResolvedRun) -> str | None:
    """The command that builds the run's model and data offline (the recipe's `assets:`): such a model is never
    downloaded. None for a model from the hub."""
    if not run.recipe.assets:
        return None
    return f"rlrecipes {run.recipe.assets} --models-dir {run.paths['MODELS_DIR']} --data-dir {run.paths['DATA_DIR']}"


def is_complete(target: Path) -> bool:
    """config.json + weights + our marker (written only after a whole download)."""
    if not (target / "config.json").is_file() or not (target / MARKER).is_file():
        return False
    return any(target.glob("*.safetensors")) or any(target.glob("*.bin"))


def hub_offline() -> bool:
    """huggingface_hub's own verdict (HF_HUB_OFFLINE, else TRANSFORMERS_OFFLINE), read when it is imported."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def hub_token() -> tuple[str | None, str]:
    """(token, where it came from): huggingface_hub's `get_token()` -- HF_TOKEN (or the older
    HUGGING_FACE_HUB_TOKEN), else the token `hf auth login` saved under HF_HOME."""
    from huggingface_hub import constants, get_token

    token = get_token()
    if token is None:
        return None, "no HF_TOKEN is set and `hf auth login` saved none"
    if os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN"):
        return token, "HF_TOKEN"
    return token, f"the token `hf auth login` saved ({constants.HF_TOKEN_PATH})"


def ensure_model(hub_id: str, revision: str, target: Path, force: bool = False) -> str | None:
    """hub_id at revision in target, downloaded unless a completed download is there already (force: again).

    Returns where the files came from, or None when nothing was done. The marker (MARKER) is written last, so
    an interrupted download is not taken for a complete one.
    """
    if is_complete(target) and not force:
        return None
    if hub_offline():
        source = _from_cache_offline(hub_id, revision, target)
    else:
        source = _download(hub_id, revision, target)
    if not (target / "config.json").is_file():
        raise StageFailed(f"{hub_id}: no config.json after the download; is it a transformers model?", where=str(target))
    atomic_write_text(target / MARKER, json.dumps(
        {"hub_id": hub_id, "revision": revision, "source": source,
         "completed_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=2) + "\n")
    return source


def _download(hub_id: str, revision: str, target: Path) -> str:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    token, token_from = hub_token()
    try:
        snapshot_download(repo_id=hub_id, revision=revision, local_dir=target, token=token,
                          ignore_patterns=_ignore_patterns(hub_id, revision, token))
    except GatedRepoError as exc:
        raise RecipeError(
            f"{hub_id} is gated: " + (f"{token_from} has no access to it" if token else "it needs a token"),
            where="HF_TOKEN", hint=f"accept the licence at https://huggingface.co/{hub_id}, then put a token with "
                                   "access in .env as HF_TOKEN=hf_... or run `hf auth login`") from exc
    except RevisionNotFoundError as exc:
        raise RecipeError(f"{hub_id} has no revision {revision!r}", where="--revision") from exc
    except RepositoryNotFoundError as exc:
        raise RecipeError(
            f"{hub_id} not found on the hub (or private and "
            + (f"{token_from} cannot see it)" if token else f"{token_from})"),
            where="model.hub_id", hint="check the recipe's model.hub_id") from exc
    except LocalEntryNotFoundError as exc:
        raise StageFailed(
            f"cannot reach the hub to download {hub_id} and nothing is at {target}",
            where=os.environ.get("HF_ENDPOINT", "https://huggingface.co"),
            hint="check the network, or copy the model there and run with HF_HUB_OFFLINE=1") from exc
    except HfHubHTTPError as exc:
        raise StageFailed(f"downloading {hub_id} failed: {exc}", where=str(target)) from exc
    return "hub"


def _ignore_patterns(hub_id: str, revision: str, token: str | None) -> list[str]:
    """IGNORE_PATTERNS, plus *.bin when the repo also has safetensors (the common case)."""
    from huggingface_hub import HfApi

    try:
        files = HfApi().list_repo_files(hub_id, revision=revision, token=token)
    except Exception:  # noqa: BLE001 -- snapshot_download reports the real error right after
        return list(IGNORE_PATTERNS)
    if any(f.endswith(".safetensors") for f in files):
        return [*IGNORE_PATTERNS, "*.bin"]
    return list(IGNORE_PATTERNS)


def _from_cache_offline(hub_id: str, revision: str, target: Path) -> str:
    """Copy the cached snapshot of hub_id into target (HF_HUB_OFFLINE=1), atomically as a directory."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        snapshot = Path(snapshot_download(repo_id=hub_id, revision=revision, local_files_only=True))
    except LocalEntryNotFoundError as exc:
        raise RecipeError(
            f"offline (HF_HUB_OFFLINE=1 or TRANSFORMERS_OFFLINE=1) and {hub_id} ({revision}) is neither "
            f"complete at {target} nor in the Hugging Face cache at {constants.HF_HUB_CACHE}",
            where="HF_HUB_OFFLINE",
            hint="run once with network access (unset HF_HUB_OFFLINE and TRANSFORMERS_OFFLINE), or copy the "
                 f"model files to {target} and touch {target / MARKER}") from exc
    if not (snapshot / "config.json").is_file():
        raise RecipeError(f"the cached snapshot of {hub_id} has no config.json", where=str(snapshot))
    staging = target.with_name(f".{target.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    # The cache holds symlinks into blobs/: copy the files themselves so the model dir stands alone.
    shutil.copytree(snapshot, staging, symlinks=False)
    if target.exists():
        shutil.rmtree(target)
    os.replace(staging, target)
    return f"cache:{snapshot}"

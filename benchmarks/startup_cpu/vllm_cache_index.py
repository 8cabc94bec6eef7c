"""vLLM's own compile-cache index, cut as a stop inside its write would leave it, before and after the train stage
sets it aside (rlrecipes/launch/stages.py, set_aside_damaged_vllm_cache_indexes; docs/images.md, Compile caches).

    PYTHONPATH=. python benchmarks/startup_cpu/vllm_cache_index.py

Needs a Python where vLLM 0.24.0 imports (the Hopper set of benchmarks/startup_cpu/hopper_env.sh; no GPU is
used: nothing is compiled, only vLLM's CompilerManager writes and reads its index). Prints what vLLM wrote, whether
vLLM reads it back whole and cut, what the stage sets aside, and what vLLM then starts with.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from vllm.compilation.backends import CompilerManager
from vllm.config import CompilationConfig
from vllm.config.utils import Range

from rlrecipes.launch.stages import set_aside_damaged_vllm_cache_indexes, vllm_index_problem


def manager(folder: Path) -> CompilerManager:
    """A CompilerManager reading `folder` as a vLLM engine's start does (initialize_cache, cache on)."""
    made = CompilerManager(CompilationConfig())
    made.initialize_cache(str(folder), disable_cache=False, prefix="backbone")
    return made


def main() -> None:
    root = Path(tempfile.mkdtemp())
    folder = root / "torch_compile_cache" / "0a1b2c3d4e" / "rank_0_0" / "backbone"
    folder.mkdir(parents=True)
    writer = manager(folder)
    for i in range(3):
        writer.cache[(Range(1, 8192), i, writer.compiler.name)] = {"graph_handle": (f"artifact_{i}",) * 2,
                                                                    "cache_key": f"k{i}"}
    writer.is_cache_updated = True
    writer.save_to_file()
    index = folder / "vllm_compile_cache.py"
    text = index.read_text()
    print(f"vLLM wrote {len(text)} characters; the stage's check: {vllm_index_problem(text) or 'whole'}")
    print(f"vLLM reads it back: {len(manager(folder).cache)} entries")
    index.write_text(text[: len(text) // 2])
    try:
        manager(folder)
        print("vLLM reads the cut index")
    except Exception as exc:  # noqa: BLE001 -- what vLLM raises is the finding
        print(f"vLLM on the cut index: {type(exc).__name__}: {str(exc)[:70]}")
    for path, why in set_aside_damaged_vllm_cache_indexes(root):
        print(f"set aside: {path.relative_to(root)} {why}")
    print(f"vLLM then starts with {len(manager(folder).cache)} entries (it compiles again)")
    shutil.rmtree(root)


if __name__ == "__main__":
    main()

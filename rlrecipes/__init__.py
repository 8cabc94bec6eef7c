"""rlrecipes: reproducible verl recipes for RL post-training of LLMs."""

# The one version source: pyproject.toml reads it (dynamic = ["version"]), `rlrecipes --version` prints it.
__version__ = "0.1.0"

"""Smoke stage: tiny offline assets (`rlrecipes smoke-assets`) and the GPU smoke run (`rlrecipes smoke`)."""

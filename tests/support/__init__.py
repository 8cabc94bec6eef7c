"""Test support code shared by several test modules (fixtures that need more than conftest.py holds)."""

"""Helpers shared by tests (importable because pytest puts tests/ on sys.path for its conftest)."""

"""Pytest configuration; shared helpers live in ``support.py`` (import them from there, not from
conftest: tests/runtime has a conftest of its own and the module name would be ambiguous)."""

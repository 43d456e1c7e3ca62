"""Fixtures of the runtime tests; the helpers themselves live in ``runtime_support.py``."""

from runtime_support import write_json  # noqa: F401  (a fixture: pytest finds it here)

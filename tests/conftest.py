"""Pytest configuration; shared helpers live in ``support.py`` (import them from there, not from
conftest: tests/runtime has a conftest of its own and the module name would be ambiguous)."""

import os

from hypothesis import settings

# Property tests are derandomized by default, so a run (CI's included) is reproducible: every
# hypothesis test draws the same examples each time. HYPOTHESIS_PROFILE=explore draws fresh ones.
settings.register_profile("deterministic", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

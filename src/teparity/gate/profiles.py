"""hypothesis's profiles for the numerics tier's drawn networks: a small one while developing, and a derandomized
one without an example database in CI (``CI`` set, or ``TEPARITY_HYPOTHESIS_PROFILE=ci``)."""

from __future__ import annotations

import os


def register_hypothesis_profiles() -> None:
    from hypothesis import HealthCheck, settings

    common = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
    settings.register_profile("dev", max_examples=20, **common)
    settings.register_profile("ci", max_examples=30, derandomize=True, database=None, print_blob=True, **common)
    settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("TEPARITY_HYPOTHESIS_PROFILE", "dev"))

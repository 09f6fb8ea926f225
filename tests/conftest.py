"""Suite-wide settings: hypothesis profiles (`LAMINA_EXHAUSTIVE=1` selects the long one)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

EXHAUSTIVE = os.environ.get("LAMINA_EXHAUSTIVE") == "1"

settings.register_profile("default", max_examples=100, deadline=None)
settings.register_profile("exhaustive", max_examples=5_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# CI runs the same examples every time (a red CI is then reproducible, never a coin toss);
# local runs keep exploring and remember their failures in .hypothesis/.
settings.register_profile("ci", parent=settings.get_profile("default"), derandomize=True, print_blob=True)
settings.load_profile("exhaustive" if EXHAUSTIVE else "ci" if os.environ.get("CI") == "true" else "default")
pytest_plugins = ["tests.wire.fixtures"]

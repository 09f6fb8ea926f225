"""Suite-wide settings: hypothesis profiles (`LAMINA_EXHAUSTIVE=1`: the long one), memory stores dropped, slow first."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

EXHAUSTIVE = os.environ.get("LAMINA_EXHAUSTIVE") == "1"

# No wall-clock judgement in a test: hypothesis's too_slow health check times data generation, which a loaded
# machine (three workers on two cores) slows past its limit, so it is off with the deadline.
settings.register_profile("default", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("exhaustive", max_examples=5_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# CI runs the same examples every time (a red CI is then reproducible, never a coin toss);
# local runs keep exploring and remember their failures in .hypothesis/.
settings.register_profile("ci", parent=settings.get_profile("default"), derandomize=True, print_blob=True)
settings.load_profile("exhaustive" if EXHAUSTIVE else "ci" if os.environ.get("CI") == "true" else "default")
pytest_plugins = ["tests.wire.fixtures"]


def pytest_configure(config: pytest.Config) -> None:
    """`LAMINA_CPU_PROFILE=report.txt`: load the plugin reporting each test's CPU (`tests/support/cpu_profile.py`).

    The user's cache folder is a fresh one (model discovery keeps the models endpoint's answers there).
    """
    cache = tempfile.mkdtemp(prefix="lamina-test-cache-")
    os.environ["XDG_CACHE_HOME"] = cache
    atexit.register(shutil.rmtree, cache, ignore_errors=True)
    report = os.environ.get("LAMINA_CPU_PROFILE")
    if report:
        from tests.support.cpu_profile import CpuProfile

        config.pluginmanager.register(CpuProfile(Path(report).resolve()), "lamina_cpu_profile")


def examples(default: int, exhaustive: int = 5_000) -> int:
    """`max_examples` for a property with its own count: `default`, or `exhaustive` under `LAMINA_EXHAUSTIVE=1`.

    A test's own `@settings(max_examples=...)` wins over the profile: without this, such a property ran
    no more examples in the exhaustive run than in the everyday one.
    """
    return max(default, exhaustive) if EXHAUSTIVE else default


@pytest.fixture(autouse=True)
def _forget_memory_stores() -> Iterator[None]:
    """After each test, drop the in-memory stores `tests.support.engine` made (if a test loaded it)."""
    yield
    support = sys.modules.get("tests.support.engine")
    if support is not None:
        support.forget_memory_stores()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first, each group in its order: the quick ones then fill the workers' last minutes.

    pytest-xdist hands out tests one at a time in this order (`make test`); in file order the suite
    ended on its longest tests (the resume, slot and browser files), one worker busy and the others done.
    """
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)

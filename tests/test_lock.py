"""The lock: pyproject.toml and uv.lock agree, requirements.lock is exported from uv.lock, and the
environment the suite runs in holds exactly the locked versions (so CI tests what a fresh clone installs)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# `make test-lowest` and `make test-latest` run the suite on other resolutions on purpose
UNLOCKED = os.environ.get("LAMINA_UNLOCKED") == "1"


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _locked_versions() -> dict[str, set[str]]:
    # a package may be locked at several versions, one per fork of the resolution (Python versions)
    lock = tomllib.loads((ROOT / "uv.lock").read_text(encoding="utf-8"))
    versions: dict[str, set[str]] = {}
    for package in lock["package"]:
        if "version" in package:
            versions.setdefault(_normalise(package["name"]), set()).add(package["version"])
    return versions


def _uv() -> str:
    found = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if found is None:
        pytest.fail("uv is not installed: it is locked in the dev extra (`make test` installs it)")
    return found


def test_pyproject_and_the_lock_agree() -> None:
    # --check: fails when pyproject.toml asks for something uv.lock does not resolve; --offline: no index
    result = subprocess.run(
        [_uv(), "lock", "--check", "--offline"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, f"uv.lock is out of date (run `make lock`):\n{result.stderr}"


def test_requirements_lock_is_exported_from_uv_lock() -> None:
    exported = [
        (_normalise(name), version)
        for name, version in re.findall(
            r"^([A-Za-z0-9_.\-]+)==([^\s;\\]+)", (ROOT / "requirements.lock").read_text(), re.M
        )
    ]
    locked = _locked_versions()
    assert exported, "requirements.lock pins nothing"
    differing = {name: (version, locked.get(name)) for name, version in exported if version not in locked.get(name, ())}
    assert not differing, f"requirements.lock and uv.lock disagree (run `make lock`): {differing}"
    assert "--hash=sha256:" in (ROOT / "requirements.lock").read_text()


@pytest.mark.skipif(UNLOCKED, reason="LAMINA_UNLOCKED=1: this run installs another resolution on purpose")
def test_the_installed_versions_are_the_locked_ones() -> None:
    locked = _locked_versions()
    installed = {_normalise(dist.metadata["Name"]): dist.version for dist in metadata.distributions()}
    differing = {
        name: (version, locked[name])
        for name, version in installed.items()
        if name in locked and name != "lamina" and version not in locked[name]
    }
    assert not differing, f"installed (left) differs from uv.lock (right): {differing}"
    # every package the suite needs is in the lock, and so installed from it
    for needed in ("anthropic", "openai", "mcp", "msgspec", "psycopg", "pytest", "hypothesis", "uv"):
        assert needed in installed and needed in locked, needed

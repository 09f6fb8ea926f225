"""The core install: Lamina's wheel in a fresh venv without extras (uv builds it, makes the venv, installs).

Shared by `python -m benchmarks cli` (its size) and `tests/test_core_install.py` (what runs there).
uv comes from the project's venv (`python -m uv`); each step tries the warm package cache first
(`--offline`) and asks the registry only when the cache lacks something.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_NOT_INHERITED = frozenset({"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE"})
"""Left out of the venv's environment: the wheel is what is imported, with its bytecode as pip writes it."""


@dataclass(frozen=True, slots=True)
class CoreVenv:
    """A venv holding Lamina's wheel and its core dependencies, nothing else."""

    folder: Path

    @property
    def python(self) -> Path:
        return self.folder / "bin" / "python"

    def script(self, name: str) -> Path:
        """A console script of the venv (`lamina`)."""
        return self.folder / "bin" / name

    def site_packages(self) -> Path:
        return next((self.folder / "lib").glob("python3*/site-packages"))

    def distributions(self) -> list[str]:
        """The names of the installed distributions, Lamina among them (a uv venv has no pip)."""
        listed = _uv("pip", "list", "--python", str(self.python), "--format", "json")
        return sorted(item["name"] for item in json.loads(listed))

    def megabytes(self) -> float:
        """The size of site-packages in MiB (the files' own sizes, as `du --apparent-size`)."""
        total = sum(p.lstat().st_size for p in self.site_packages().rglob("*") if not p.is_dir())
        return total / (1024 * 1024)

    def run(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        """Run a command with the venv's own environment: no PYTHONPATH, so the wheel is what is imported."""
        env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
        env["PATH"] = f"{self.folder / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)


def uv_available() -> bool:
    """Whether `python -m uv` runs in the project's venv."""
    try:
        return subprocess.run([sys.executable, "-m", "uv", "--version"], capture_output=True).returncode == 0
    except OSError:
        return False


def _uv(*args: str) -> str:
    """uv's output, from the package cache alone when it can, else asking the registry."""
    command = [sys.executable, "-m", "uv", *args]
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    offline = subprocess.run([*command, "--offline"], capture_output=True, text=True, env=env, check=False)
    if offline.returncode == 0:
        return offline.stdout
    online = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if online.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:2])} failed:\n{online.stderr}")
    return online.stdout


def build_wheel(out: Path) -> Path:
    """Lamina's wheel, built from the checkout into `out`."""
    _uv("build", "--wheel", "--quiet", "--out-dir", str(out), str(ROOT))
    return next(out.glob("lamina-*.whl"))


def core_venv(folder: Path, wheel: Path) -> CoreVenv:
    """A fresh venv in `folder` with `wheel` installed, no extras, its bytecode compiled (as pip does)."""
    _uv("venv", "--quiet", "--python", sys.executable, str(folder))
    venv = CoreVenv(folder)
    _uv("pip", "install", "--quiet", "--compile-bytecode", "--python", str(venv.python), str(wheel))  # as pip does
    return venv

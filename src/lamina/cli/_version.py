"""The version line `lamina --version` prints (imports nothing of the `cli` extra)."""

from __future__ import annotations


def version_line() -> str:
    """`lamina X.Y.Z`, the version of the installed distribution.

    Returns:
        The line, or `lamina (not installed)` when no distribution is installed.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"lamina {version('lamina')}"
    except PackageNotFoundError:
        return "lamina (not installed)"

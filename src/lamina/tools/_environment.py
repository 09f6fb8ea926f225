"""The environment a sandboxed command gets: the caller's, without keys, tokens and passwords (pure).

A variable is dropped when a part of its name says it holds a secret (`OPENAI_API_KEY`,
`GITHUB_TOKEN`, `AWS_SECRET_ACCESS_KEY`, `PGPASSWORD`, `SSH_AUTH_SOCK`), when its value looks like
one (a known key prefix such as `sk-` or `ghp_`, a URL with a password), or when it points at an
agent that signs or runs things for the user (the session bus). See docs/security.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

KEPT: Final = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "PWD", "OLDPWD", "COLORTERM"}
)
"""Kept whatever they hold (with every `LC_*`)."""

_SECRET_PARTS: Final = frozenset(
    {
        "KEY",
        "KEYS",
        "APIKEY",
        "TOKEN",
        "TOKENS",
        "SECRET",
        "SECRETS",
        "PASS",
        "PASSWD",
        "PASSWORD",
        "PASSPHRASE",
        "PWD",
        "AUTH",
        "CREDENTIAL",
        "CREDENTIALS",
        "COOKIE",
        "PAT",
        "PRIVATE",
    }
)
"""A name with one of these among its `_`-separated parts is dropped (`MYSQL_PWD`, `GH_PAT`)."""

_SECRET_WORDS: Final = ("PASSWORD", "PASSWD", "SECRET", "TOKEN", "APIKEY", "CREDENTIAL")
"""A name containing one of these anywhere is dropped (`PGPASSWORD`, `NPMTOKEN`)."""

_AGENTS: Final = frozenset({"DBUS_SESSION_BUS_ADDRESS", "SSH_AGENT_PID", "GPG_AGENT_INFO", "XAUTHORITY"})
"""Handles on the user's agents (they answer a command that can reach them)."""

_SECRET_VALUE: Final = re.compile(
    r"""
    \A\s*(?:
        sk-[A-Za-z0-9_-]{8,}                        # OpenAI, Anthropic (sk-ant-…)
      | gh[pousr]_[A-Za-z0-9]{16,} | github_pat_\w{16,}
      | glpat-[\w-]{16,} | xox[abprs]-[\w-]{8,} | hf_[A-Za-z0-9]{16,}
      | AKIA[0-9A-Z]{16} | AIza[\w-]{30,}
      | -----BEGIN[ A-Z]*PRIVATE\ KEY-----
    )
    | \A[a-zA-Z][a-zA-Z0-9+.-]*://[^/@\s:]*:[^/@\s]+@  # a URL with a password in it
    """,
    re.VERBOSE,
)


def is_secret(name: str, value: str) -> bool:
    """Whether the variable `name=value` looks like it holds a secret (or a handle on the user's agents)."""
    upper = name.upper()
    if upper in KEPT or upper.startswith("LC_"):
        return False
    if upper in _AGENTS or any(word in upper for word in _SECRET_WORDS):
        return True
    if any(part in _SECRET_PARTS for part in re.split(r"[^A-Z0-9]+", upper)):
        return True
    return _SECRET_VALUE.search(value) is not None


def clean_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without the variables `is_secret` finds."""
    return {name: value for name, value in environ.items() if not is_secret(name, value)}

"""The sandbox's environment policy: keys, tokens and passwords are dropped; the rest is kept."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lamina.tools._environment import KEPT, clean_environment, is_secret

_word = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=1, max_size=8)
_secret_part = st.sampled_from(["KEY", "API_KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "AUTH", "CREDENTIALS"])
_harmless = st.text(alphabet="abcdefghijklmnopqrstuvwxyz/._ ", max_size=30)


@given(before=st.lists(_word, max_size=2), part=_secret_part, after=st.lists(_word, max_size=2), value=_harmless)
def test_a_name_with_a_secret_part_is_dropped_whatever_it_holds(
    before: list[str], part: str, after: list[str], value: str
) -> None:
    name = "_".join([*before, part, *after])
    assert is_secret(name, value)
    assert is_secret(name.lower(), value)
    assert clean_environment({name: value, "PATH": "/bin"}) == {"PATH": "/bin"}


@given(name=st.sampled_from(sorted(KEPT)), value=st.text(max_size=40))
def test_the_kept_variables_are_kept_whatever_they_hold(name: str, value: str) -> None:
    assert not is_secret(name, value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("OPENAI_API_KEY", "x"),
        ("ANTHROPIC_API_KEY", "x"),
        ("ANTHROPIC_AUTH_TOKEN", "x"),
        ("AWS_SECRET_ACCESS_KEY", "x"),
        ("AWS_SESSION_TOKEN", "x"),
        ("PGPASSWORD", "x"),
        ("MYSQL_PWD", "x"),
        ("SSH_AUTH_SOCK", "/run/user/1000/ssh"),
        ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus"),
        ("DATABASE_URL", "postgresql://app:hunter2@db/app"),
        ("SOME_SETTING", "sk-ant-api03-abcdefghijklmnop"),
        ("MY_THING", "ghp_abcdefghijklmnopqrstuvwxyz"),
        ("CI_PAYLOAD", "AKIAABCDEFGHIJKLMNOP"),
    ],
)
def test_known_secrets_are_dropped(name: str, value: str) -> None:
    assert is_secret(name, value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("PATH", "/usr/bin:/bin"),
        ("PWD", "/src/app"),
        ("LC_ALL", "C.UTF-8"),
        ("GIT_AUTHOR_NAME", "Ada"),
        ("VIRTUAL_ENV", "/src/app/.venv"),
        ("PIP_INDEX_URL", "https://pypi.example/simple"),
        ("KEYBOARD_LAYOUT", "us"),
        ("PYTHONPATH", "src"),
    ],
)
def test_ordinary_variables_are_kept(name: str, value: str) -> None:
    assert not is_secret(name, value)

"""`open_store`: a malformed store location is a `UsageError` naming the setting, never a raw error."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lamina.errors import UsageError
from lamina.session import LocalSessionStore, SessionStore, open_store
from lamina.session.postgres import PostgresSessionStore

MALFORMED: dict[str, tuple[str, str]] = {  # case: (value, what the message says)
    "no host or database": ("postgresql://", "the URL names no host"),
    "short scheme, nothing else": ("postgres://", "the URL names no host"),
    "no host": ("postgresql:///lamina", "the URL names no host"),
    "no database": ("postgresql://db.example", "the URL names no database"),
    "port not a number": ("postgresql://db.example:fivefour/lamina", "not a valid URL (Port could not be cast"),
    "port out of range": ("postgresql://db.example:99999/lamina", "not a valid URL (Port out of range"),
    "unclosed IPv6 host": ("postgresql://[::1/lamina", "not a valid URL (Invalid IPv6 URL)"),
    "unknown query parameter": ("postgresql://db.example/lamina?colour=red", 'invalid URI query parameter: "colour"'),
    "bad percent escape": ("postgresql://db.example/lam%zzina", 'invalid percent-encoded token: "lam%zzina"'),
    "empty schema": ("postgresql://db.example/lamina?schema=", "the URL's schema= is empty"),
    "control character": ("postgresql://db.example/lam\x1bina", "the URL holds a control character"),
    "no such user": ("~nosuchuser-lamina/x", "cannot expand '~nosuchuser-lamina': no user 'nosuchuser-lamina'"),
    "another scheme": ("mysql://db.example/lamina", "'mysql' is not a store"),
    "a driver in the scheme": ("postgresql+psycopg://db.example/lamina", "'postgresql+psycopg' is not a store"),
    "a file URL": ("file:///tmp/sessions", "'file' is not a store"),
    "one slash": ("postgresql:/db.example/lamina", "a PostgreSQL URL starts with postgresql://"),
    "a NUL": ("/tmp/ses\0sions", "a folder name cannot hold a NUL"),
    "surrounding space": (" /tmp/sessions", "starts or ends with a space"),
    "a file": ("/dev/null", "/dev/null is not a folder"),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_location_is_a_usage_error_naming_the_setting(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    value, problem = MALFORMED[case]
    calls: list[tuple[str | None, str | None, str]] = [(value, None, "store location"), (value, "--store", "--store")]
    if "\0" not in value:  # the environment cannot hold a NUL
        monkeypatch.setenv("LAMINA_STORE", value)
        calls.append((None, None, "LAMINA_STORE"))
    for location, setting, named in calls:
        with pytest.raises(UsageError) as caught:
            open_store(location, setting=setting)
        message = str(caught.value)
        assert message.startswith(f"{named}=") and problem in message, message
        assert "\n" not in message


def test_the_password_is_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    for value in (
        "postgresql://agent:s3cr@t-pw@db.example/lamina?colour=red",
        "postgresql://agent:s3cr@t-pw@db.example:port/lamina",
        "postgresql://agent:s3cr@t-pw@[::1/lamina",
    ):
        monkeypatch.setenv("LAMINA_STORE", value)
        with pytest.raises(UsageError) as caught:
            open_store()
        assert "s3cr" not in str(caught.value) and "t-pw" not in str(caught.value)
        assert "LAMINA_STORE='postgresql://agent:***@" in str(caught.value)


def test_well_formed_locations_still_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAMINA_FILES", str(tmp_path / "files"))
    for url in (
        "postgresql://agent@db.example/lamina",
        "postgres://agent:pw@db.example:5433/lamina?schema=team_a&sslmode=require",
        "postgresql://agent@localhost/lamina?host=/var/run/postgresql",
    ):
        store = open_store(url)  # nothing connects until first use
        assert isinstance(store, PostgresSessionStore) and "pw" not in store.location
    monkeypatch.setenv("HOME", str(tmp_path))
    assert isinstance(open_store("~/sessions"), LocalSessionStore)
    assert isinstance(open_store(tmp_path / "sessions"), LocalSessionStore)
    assert isinstance(open_store("relative/sessions"), LocalSessionStore)


_URLISH = st.text(alphabet="ab1:/@?=&%[]~. \x1b", max_size=30)
_VALUES = st.one_of(
    st.text(max_size=60).filter(lambda s: "\0" not in s),
    st.tuples(st.sampled_from(["postgresql://", "postgres://", "postgresql:", "~", "mysql://", "./"]), _URLISH).map(
        "".join
    ),
)


@pytest.mark.slow
@given(_VALUES)
def test_any_value_of_the_setting_opens_a_store_or_is_a_usage_error(value: str) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAMINA_STORE", value)
        try:
            store: SessionStore = open_store()
        except UsageError as exc:
            assert str(exc).startswith("LAMINA_STORE=") or "pip install" in str(exc)
        else:
            store.close()

"""A feature whose extra is not installed names the extra to install, in one line (in process).

The same from the wheel, in a fresh venv without extras: tests/test_core_install.py.

Each test hides the optional modules (`sys.modules[name] = None` makes their import fail) and drops
Lamina's modules that import them, so the next import runs the guarded import again.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from lamina import NamedBytes
from lamina.attachments import AttachmentStore
from lamina.errors import AttachmentError, MissingExtraError, UsageError
from lamina.providers import provider_from_spec
from lamina.session import open_store


def _hide(monkeypatch: pytest.MonkeyPatch, *modules: str, reload: tuple[str, ...] = ()) -> None:
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)
    for name in [m for m in sys.modules if m.startswith(reload)] if reload else []:
        monkeypatch.delitem(sys.modules, name)


def test_the_error_names_the_feature_the_extra_and_the_missing_module() -> None:
    error = MissingExtraError("a PDF attachment", "documents", "pypdf")
    assert isinstance(error, UsageError)
    assert (error.feature, error.extra, error.module) == ("a PDF attachment", "documents", "pypdf")
    assert str(error) == (
        "a PDF attachment needs the 'documents' extra: pip install 'lamina[documents]' (no module named 'pypdf')"
    )
    assert str(MissingExtraError("the CLI", "cli")) == "the CLI needs the 'cli' extra: pip install 'lamina[cli]'"


def test_of_names_the_top_level_module_of_the_import_error() -> None:
    missing = ModuleNotFoundError("no module named 'anthropic.types'", name="anthropic.types")
    assert MissingExtraError.of(missing, "the Anthropic provider", "anthropic").module == "anthropic"


@pytest.mark.parametrize(
    ("spec", "module", "extra"),
    [
        ("anthropic:claude-sonnet-5", "anthropic", "anthropic"),
        ("openai:gpt-5", "openai", "openai"),
        ("openai-compat:http://localhost:1/v1#m", "openai", "openai"),
    ],
)
def test_a_provider_spec_without_its_sdk_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, spec: str, module: str, extra: str
) -> None:
    _hide(monkeypatch, module, reload=(f"lamina.providers._{module}",))
    with pytest.raises(MissingExtraError, match=rf"needs the '{extra}' extra: pip install 'lamina\[{extra}\]'"):
        provider_from_spec(spec)


def test_the_lamina_command_without_the_cli_extra_prints_one_line_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import lamina.cli

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "typer" else real(name, *a))
    monkeypatch.setattr(sys, "argv", ["lamina", "--help"])
    with pytest.raises(SystemExit) as stopped:
        lamina.cli.main()
    assert stopped.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "error: the lamina command needs the 'cli' extra: pip install 'lamina[cli]' (no module named 'typer')\n"
    )


def test_the_typer_app_without_the_cli_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import lamina.cli

    _hide(monkeypatch, "typer", reload=("lamina.cli._",))
    monkeypatch.delitem(vars(lamina.cli), "app", raising=False)
    with pytest.raises(MissingExtraError, match=r"the lamina command needs the 'cli' extra"):
        _ = lamina.cli.app


@pytest.mark.parametrize(
    ("name", "data", "module", "feature"),
    [
        ("report.pdf", b"%PDF-1.4\n%%EOF\n", "pypdf", "a PDF attachment"),
        ("shot.png", bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001"), "PIL", "an image attachment"),
        ("invite.ics", b"BEGIN:VCALENDAR\r\nEND:VCALENDAR\r\n", "icalendar", "a calendar attachment"),
        ("page.html", b"<!doctype html><p>hi</p>", "markitdown", "a Word, Excel, PowerPoint or HTML attachment"),
    ],
)
def test_an_attachment_without_the_documents_extra_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, data: bytes, module: str, feature: str
) -> None:
    _hide(monkeypatch, module, reload=("lamina.attachments._images", "lamina.attachments._markitdown"))
    if module == "markitdown":
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    store = AttachmentStore(tmp_path / "attachments", tmp_path / "data")
    with pytest.raises(AttachmentError) as refused:
        store.add_all([NamedBytes(name, data)])
    assert refused.value.name == name
    assert refused.value.reason.startswith(f"{feature} needs the 'documents' extra: pip install 'lamina[documents]'")
    assert store.add_all([NamedBytes("notes.txt", b"plain text needs no extra")])[0].kind == "text"


def test_a_postgres_url_without_the_postgres_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "psycopg", "psycopg_pool", reload=("lamina.session.postgres",))
    with pytest.raises(MissingExtraError, match=r"the PostgreSQL store needs the 'postgres' extra"):
        open_store("postgresql://localhost/lamina")

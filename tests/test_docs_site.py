"""The docs site's API reference: one page per public module, each in mkdocs.yml's nav, and no other."""

from __future__ import annotations

from pathlib import Path

from tests.test_public_api import PUBLIC_MODULES

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "reference"


def test_every_public_module_has_a_reference_page_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for module in PUBLIC_MODULES:
        page = REFERENCE / f"{module}.md"
        assert page.is_file(), f"no reference page for {module}: add docs/reference/{module}.md"
        assert page.read_text(encoding="utf-8").startswith(f"::: {module}\n"), page
        assert f"- {module}: reference/{module}.md\n" in nav, f"mkdocs.yml's nav lacks reference/{module}.md"


def test_every_reference_page_is_of_a_public_module() -> None:
    assert sorted(page.stem for page in REFERENCE.glob("*.md")) == sorted(PUBLIC_MODULES)

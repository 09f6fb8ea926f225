"""The inspector in Chromium: each session's status, the list at 1,280 px, a tool call's page, the branch's counts.

Screenshots go where the other browser tests put theirs (`test-output/serve/`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from lamina.agent import AgentOptions, open_agent
from lamina.context import INTERRUPTED_RESULT
from lamina.errors import ProviderError
from lamina.providers import ScriptedError, ScriptedProvider
from lamina.session import (
    AssistantMessage,
    LocalSessionStore,
    OutboxRecord,
    SessionLog,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from tests.serve.conftest import Running, Stored, running_server
from tests.serve.sessions import edits_session
from tests.serve.test_browser import Watched, browser, shot  # noqa: F401 (the browser fixture)

pytestmark = pytest.mark.xdist_group("browser")

LONG_CWD = "/home/someone/projects/a-rather-long-project-name/services/billing-report-generator/checkout"
AUTH_ERROR = "invalid x-api-key: the key was revoked"


@dataclass(frozen=True)
class Standings:
    running: Running
    ids: dict[str, str]
    """Status -> the session that has it."""
    store: LocalSessionStore
    edits: str
    """A session whose model edits one file and writes another (not one of `ids`: its status is `ended`)."""


def _answered(session: SessionLog, text: str) -> None:
    session.append(UserMessage(text=text))
    session.append(AssistantMessage(text="Done.", model="claude-sonnet-5", usage=Usage(input=30, output=4)))


def _failed(store: LocalSessionStore, ws: Path) -> str:
    """A real agent whose provider refuses the key: the turn fails and the agent logs the error."""
    provider = ScriptedProvider([ScriptedError("auth", message=AUTH_ERROR)])

    async def run() -> str:
        agent = open_agent(store, provider, workspace=ws, options=AgentOptions(mode="execute"))
        with contextlib.suppress(ProviderError):
            await agent.run_turn("Summarise the billing report generator's checkout flow for a new colleague.")
        agent.engine.session.close()
        return agent.engine.session.id

    made: list[str] = []  # in a thread: Playwright's sync API may run an event loop in this one
    writer = threading.Thread(target=lambda: made.append(asyncio.run(run())))
    writer.start()
    writer.join(60)
    return made[0]


@pytest.fixture(scope="module")
def standings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standings]:
    root = tmp_path_factory.mktemp("standings")
    ws = root / "ws"
    ws.mkdir()
    (ws / "AGENTS.md").write_text("# Rules\n- Keep it short.\n")
    store = LocalSessionStore(root / "store")
    ids = {"failed": _failed(store, ws)}
    edits = edits_session(store, root / "edits-ws")
    with store.create(cwd=LONG_CWD, title="Refactor the checkout flow's totals and taxes, then rerun the suite") as s:
        _answered(s, "Refactor the checkout flow's totals and taxes, then rerun the suite")
        ids["ended"] = s.id
    with store.create(cwd=LONG_CWD + "/payments") as s:
        s.append(UserMessage(text="Run the long integration suite"))
        s.append(AssistantMessage(text="Running it.", model="claude-sonnet-5", usage=Usage(input=30, output=4)))
        s.append(ToolCall(call_id="c1", name="Bash", input={"command": "make integration"}))
        s.append(ToolResult(call_id="c1", name="Bash", content=INTERRUPTED_RESULT, is_error=True))
        s.append(OutboxRecord(part_id="p1", status="queued", kind="interruption", text="The user interrupted"))
        ids["interrupted"] = s.id
    with store.create(cwd=LONG_CWD, title="x" * 150) as s:  # a title with no space to break at
        _answered(s, "y" * 150)
    waiting = store.create(cwd=LONG_CWD)  # a chat still open, its turn over
    _answered(waiting, "What does checkout() return?")
    ids["waiting for the user"] = waiting.id
    running = store.create(cwd=str(ws))  # a turn under way
    running.append(UserMessage(text="Explain the retry policy"))
    running.flush()
    ids["running"] = running.id
    try:
        with running_server(store) as served:
            yield Standings(served, ids, store, edits)
    finally:
        waiting.close()
        running.close()


@pytest.fixture
def wide(browser: BrowserContext) -> Iterator[Watched]:  # noqa: F811 (the fixture imported above)
    page = browser.new_page()
    page.set_viewport_size({"width": 1280, "height": 900})
    watched = Watched(page)
    yield watched
    page.close()
    assert watched.problems == []


def _page_width(page: Page) -> int:
    return int(page.evaluate("() => document.documentElement.scrollWidth"))


@pytest.mark.slow
def test_each_session_shows_its_status_and_the_list_fits_1280_px(wide: Watched, standings: Standings) -> None:
    p = wide.page
    p.goto(standings.running.url + "/")
    for status, session_id in standings.ids.items():
        expect(p.locator(f'tr[data-session="{session_id}"] .status')).to_have_text(status)
    failed = p.locator(f'tr[data-session="{standings.ids["failed"]}"]')
    expect(failed.locator(".status-detail")).to_contain_text(AUTH_ERROR)
    for stopped in ("failed", "interrupted"):  # neither reads "waiting for the model" (the running one does)
        expect(p.locator(f'tr[data-session="{standings.ids[stopped]}"]')).not_to_contain_text("waiting for the model")
    cell = p.locator(f'tr[data-session="{standings.ids["ended"]}"] .short-path')
    expect(cell).to_have_attribute("title", LONG_CWD)
    assert "…" in cell.inner_text()
    widths = p.locator("#sessions thead th").evaluate_all("hs => hs.map(h => h.textContent + ':' + h.offsetWidth)")
    shot(p, "sessions-list-statuses-1280")
    assert _page_width(p) <= 1280, (_page_width(p), widths)


@pytest.mark.slow
def test_a_failed_sessions_page_says_so_with_its_error(wide: Watched, standings: Standings) -> None:
    p = wide.page
    p.goto(f"{standings.running.url}/sessions/{standings.ids['failed']}")
    status = p.locator("#session-status")
    expect(status.locator(".status")).to_have_text("failed")
    expect(status).to_contain_text(AUTH_ERROR)
    expect(p.locator("main")).not_to_contain_text("waiting for the model")
    expect(p.locator("#chart-empty")).to_be_visible()
    shot(p, "session-failed")
    p.goto(f"{standings.running.url}/sessions/{standings.ids['interrupted']}")
    expect(p.locator("#session-status .status")).to_have_text("interrupted")
    shot(p, "session-interrupted")


@pytest.mark.slow
def test_an_edits_entry_page_shows_the_call_as_a_diff_with_links_to_its_result_and_request(
    wide: Watched, standings: Standings
) -> None:
    store, edits, url = standings.store, standings.edits, standings.running.url
    with store.open(edits, writable=False) as session:
        entries = session.entries()
    edit = next(e for e in entries if isinstance(e, ToolCall) and e.name == "Edit")
    write = next(e for e in entries if isinstance(e, ToolCall) and e.name == "Write")
    result = next(e for e in entries if isinstance(e, ToolResult) and e.call_id == edit.call_id)
    asked = sum(isinstance(e, AssistantMessage) for e in entries[: entries.index(edit)]) - 1
    p = wide.page
    p.goto(f"{url}/sessions/{edits}/entries/{edit.id}")
    call = p.locator("#entry-call .call")
    expect(call.locator(".call-name")).to_have_text("Edit")
    expect(call.locator(".call-target")).to_have_text("app.py")
    expect(call.locator("pre.diff .del")).to_have_text("- sum(xs) + 1")
    expect(call.locator("pre.diff .add")).to_have_text("+ sum(xs)")
    expect(p.locator("details.raw-input")).not_to_have_attribute("open", "")  # the JSON only on request
    expect(p.locator("#request-link")).to_have_text(f"asked for in request #{asked}: layers as sent")
    shot(p, "entry-edit-call")
    p.locator("#result-link").click()
    expect(p).to_have_url(f"{url}/sessions/{edits}/entries/{result.id}")
    p.locator("#call-link").click()
    expect(p).to_have_url(f"{url}/sessions/{edits}/entries/{edit.id}")
    p.locator("#request-link").click()
    expect(p).to_have_url(f"{url}/sessions/{edits}/requests/{asked}")
    p.goto(f"{url}/sessions/{edits}/entries/{write.id}")
    lines = p.locator("#entry-call pre.diff span")
    expect(lines).to_have_text(["+ # Notes", "+ - total() is pure."])
    shot(p, "entry-write-call")


@pytest.mark.slow
def test_counts_table_and_chart_follow_the_shown_branch(wide: Watched, server: Running, stored: Stored) -> None:
    rich = stored.rich
    p = wide.page
    for leaf, shot_name in ((rich.main_leaf, "branch-counts-main"), (rich.branch_leaf, "branch-counts-side")):
        if leaf == rich.main_leaf:
            p.goto(f"{server.url}/sessions/{rich.id}")
        else:
            p.locator("#branch-select").select_option(leaf)  # the switcher shows it at once
            expect(p).to_have_url(f"{server.url}/sessions/{rich.id}?leaf={leaf}")
        expect(p.locator("#chart.drawn")).to_be_visible()
        shown = p.locator("#branch-requests").inner_text()
        expect(p.locator("#chart")).to_have_attribute("data-requests", shown)
        expect(p.locator("#requests-table tbody tr")).to_have_count(int(shown))
        expect(p.locator("#stats")).to_contain_text("the shown branch")
        expect(p.locator("#log-totals")).to_contain_text("the whole log, every branch")
        expect(p.locator("#branch-select")).to_have_value(leaf)
        shot(p, shot_name)
    expect(p.locator("#branch-requests")).to_have_text("3")


@pytest.mark.slow
def test_the_status_follows_the_session_live(wide: Watched, standings: Standings) -> None:
    with standings.store.create(cwd=LONG_CWD) as session:  # its own session: the others keep their status
        session.append(UserMessage(text="How often does it retry?"))
        session.flush()
        p = wide.page
        p.goto(f"{standings.running.url}/sessions/{session.id}")
        expect(p.locator("body")).to_have_attribute("data-live", "on")
        expect(p.locator("#session-status .status")).to_have_text("running")
        expect(p.locator("#session-status")).to_contain_text("waiting for the model")
        session.append(AssistantMessage(text="Three times.", model="claude-sonnet-5", usage=Usage(input=9, output=2)))
        session.flush()
        expect(p.locator("#session-status .status")).to_have_text("waiting for the user")
        expect(p.locator("#standing")).to_have_count(1)  # moved above the plot, not left in the live region
        expect(p.locator("#standing-slot #standing")).to_have_count(1)
        expect(p.locator("#branch-requests")).to_have_text("1")
        shot(p, "session-live-status")

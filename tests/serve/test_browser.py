"""The inspector in a real browser: Debian's Chromium, headless, driven by Playwright.

Screenshots go to the test output folder (`test-output/serve/`, or `$LAMINA_TEST_OUTPUT/serve/`).
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, ConsoleMessage, Page, expect, sync_playwright

import lamina
from lamina.agent import AgentOptions, open_agent
from lamina.compaction import DeterministicSummariser
from lamina.pricing import describe_decision
from lamina.providers import ScriptedResponse
from lamina.session import (
    AssistantMessage,
    LocalSessionStore,
    PartRecord,
    StateChange,
    ToolCall,
    ToolResult,
    TurnRecord,
    Usage,
    UserMessage,
)
from tests.serve.conftest import CHROMIUM_ARGS, OUTPUT, Running, Stored, chromium_or_skip, running_server
from tests.serve.sessions import HOSTILE_SCRIPT, PLAN_STATES, _provider, edits_session, priced_session, workspace

SRC = str(Path(lamina.__file__).parents[1])

# one worker runs the module (`make test` runs pytest-xdist with --dist loadgroup): Chromium starts once
pytestmark = pytest.mark.xdist_group("browser")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory, stored: Stored) -> Iterator[BrowserContext]:
    # `stored` is made first: while the browser is open, Playwright's sync API runs an event loop in
    # this thread, and the store's sessions are made with asyncio.run (the first test to ask for
    # them may be one of these)
    executable = chromium_or_skip()
    profile = tmp_path_factory.mktemp("chromium-profile")  # a fresh user-data-dir
    OUTPUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=executable,
            args=list(CHROMIUM_ARGS),
            headless=True,
            viewport={"width": 1280, "height": 900},
        )
        context.set_default_timeout(15_000)
        yield context
        context.close()


class Watched:
    """A page and what its console said (CSP violations, script errors)."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.problems: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))

    def _console(self, message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            self.problems.append(f"{message.type}: {message.text}")


@pytest.fixture
def page(browser: BrowserContext) -> Iterator[Watched]:
    page = browser.new_page()
    watched = Watched(page)
    yield watched
    page.close()
    assert watched.problems == []


def shot(page: Page, name: str) -> Path:
    path = OUTPUT / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


@pytest.mark.slow
def test_sessions_list_and_search(page: Watched, server: Running, stored: Stored) -> None:
    p = page.page
    p.goto(server.url + "/")
    rows = p.locator("#sessions tbody tr")
    expect(p.locator(f'tr[data-session="{stored.hostile}"]')).to_have_count(1)
    rich = p.locator(f'tr[data-session="{stored.rich.id}"]')
    expect(rich.locator(".session-link")).to_have_text("Why is total() wrong? Don't change anything yet.")
    expect(rich.locator("td").nth(7)).to_have_text("5")  # turns
    expect(rich.locator("td").nth(11)).to_contain_text("$")  # an estimated cost
    shot(p, "sessions-list")
    assert p.evaluate("() => document.documentElement.scrollWidth") <= 1280  # the list fits the window
    p.fill("input[name=q]", "workspace")
    p.click("form.search button")
    expect(p.locator(f'tr[data-session="{stored.rich.id}"]')).to_be_visible()
    expect(p.locator(f'tr[data-session="{stored.hostile}"]')).to_have_count(0)
    assert rows.count() >= 1


@pytest.mark.slow
def test_session_with_branches_compaction_plan_and_plot(page: Watched, server: Running, stored: Stored) -> None:
    p = page.page
    rich = stored.rich
    p.goto(f"{server.url}/sessions/{rich.id}")
    expect(p.locator("#chart.drawn")).to_be_visible()
    expect(p.locator("#chart")).to_have_attribute("data-requests", "5")  # the main branch's requests
    expect(p.locator("#requests-table tbody tr")).to_have_count(5)
    # branches: two, the side one forked after a compaction had summarised its point
    branches = p.locator("#branches li.branch")
    expect(branches).to_have_count(2)
    side = p.locator(f'li.branch[data-leaf="{rich.branch_leaf}"]')
    expect(side.locator(".point-out-of-view")).to_be_visible()
    expect(p.locator(f"#e-{rich.fork_id} .fork-badge")).to_have_text("branch point · 2 branches")
    # the compaction: what it kept, its summary, the user's words lane
    compaction = p.locator("#compactions article.compaction")
    expect(compaction).to_have_count(1)
    expect(compaction.locator("pre.summary")).to_contain_text("Goal")
    expect(compaction.locator(".lane-list li").first).to_contain_text(
        "Why is total() wrong? Don't change anything yet."
    )
    expect(compaction.locator("b.kept")).to_have_text(re.compile(r"^[1-9]\d*$"))
    # out-of-view entries are marked, the hidden recovery bridge too
    expect(p.locator(f"#e-{rich.fork_id}")).to_have_class(re.compile(r"\bout-of-view\b"))
    expect(p.locator("#timeline li.bridge").first).to_contain_text("hidden one-shot bridge")
    # the plan and its states
    plan = p.locator('article.plan[data-plan="plan-1"]')
    expect(plan.locator(".plan-state")).to_have_text("done")
    expect(plan.locator(".transitions li")).to_have_count(len(PLAN_STATES))
    # the attachment's thumbnail is loaded from the store
    thumb = p.locator("img.thumb").first
    thumb.scroll_into_view_if_needed()
    expect(thumb).to_have_attribute("alt", "red.png")
    for _ in range(100):  # the CSP forbids eval, so poll from here rather than with wait_for_function
        if thumb.evaluate("img => img.complete && img.naturalWidth") > 0:
            break
        time.sleep(0.05)
    assert thumb.evaluate("img => img.naturalWidth") > 0
    shot(p, "session-main-branch")
    # switch branch
    side.locator("a.branch-link").click()
    expect(p.locator(f'li.branch[data-leaf="{rich.branch_leaf}"] .shown-badge')).to_be_visible()
    timeline = p.locator("#timeline")
    expect(timeline).to_contain_text("Try another way.")
    expect(timeline).not_to_contain_text("Execute the plan.")
    expect(p.locator("#compactions")).to_have_count(0)  # no compaction on this branch
    expect(p.locator("#chart")).to_have_attribute("data-requests", "3")
    shot(p, "session-side-branch")


@pytest.mark.slow
def test_request_layers_match_the_stored_data(page: Watched, server: Running, stored: Stored) -> None:
    with stored.store.open(stored.rich.id, writable=False) as session:
        entries = session.entries()
    calls = [e for e in entries if isinstance(e, AssistantMessage)]
    index = next(
        i
        for i, call in enumerate(calls)
        for e in entries
        if isinstance(e, TurnRecord) and e.turn_id == call.turn_id and e.one_shots
    )
    call = calls[index]
    record = next(e for e in entries if isinstance(e, TurnRecord) and e.turn_id == call.turn_id)
    prefix = [e for e in entries if isinstance(e, StateChange) and e.key == "stable" and e.prefix][-1].prefix
    p = page.page
    p.goto(f"{server.url}/sessions/{stored.rich.id}")
    p.locator(f"#e-{call.id} a.request-link").click()
    expect(p.locator("h1")).to_contain_text(f"Request #{index}")
    # the provider's usage, as logged
    assert call.usage is not None
    provider = p.locator('#cache-figures tr[data-side="provider"] td')
    expect(provider.nth(0)).to_have_text(f"{call.usage.cache_read:,}")
    expect(provider.nth(1)).to_have_text(f"{call.usage.cache_write:,}")
    expect(provider.nth(2)).to_have_text(f"{call.usage.input:,}")
    expect(p.locator('#cache-figures tr[data-side="simulated"] td')).to_have_count(5)
    # the tail's volatile parts and the one-shot parts, as the turn record holds them
    tail = p.locator('article[data-layer="tail"] tr.part')
    expect(tail).to_have_count(len(record.volatile))
    for row, part in zip(tail.all(), record.volatile, strict=True):
        expect(row.locator("td.key")).to_have_text(part.key)
        row.locator("summary").click()
        expect(row.locator("pre.part-text")).to_have_text(part.text)
    one_shots = p.locator('article[data-layer="one_shot"] tr.part td.key')
    expect(one_shots).to_have_text([o.key for o in record.one_shots])
    # the stable prefix: the parts the log recorded
    expect(p.locator('article[data-layer="stable"] tr.part td.key')).to_have_text([part.key for part in prefix])
    # the breakpoints, and the blocks' tokens add up to the layers'
    api = p.request.get(f"{server.url}/api/sessions/{stored.rich.id}/requests/{index}").json()
    assert 1 <= len(api["breakpoints"]) <= 4
    expect(p.locator("table.blocks tr.has-breakpoint")).to_have_count(len(api["breakpoints"]))
    layer_tokens = sum(int(x) for x in p.locator("article.layer").evaluate_all("els => els.map(e => e.dataset.tokens)"))
    last = p.locator("table.blocks tbody tr").last.locator("td").nth(6).inner_text()
    assert layer_tokens == int(last.replace(",", ""))
    shot(p, "request-layers")


@pytest.mark.slow
def test_a_live_session_updates_without_reload(page: Watched, server: Running, stored: Stored) -> None:
    """An agent writes a turn while the page is open: the page shows it, with no reload."""
    ws = workspace(stored.root)
    provider = _provider([ScriptedResponse(text="First answer."), ScriptedResponse(text="Live answer from the agent.")])
    holder: dict[str, str] = {}

    async def turn(text: str) -> None:
        agent = open_agent(
            stored.store,
            provider,
            workspace=ws,
            session_id=holder.get("id"),
            options=AgentOptions(summariser=DeterministicSummariser()),
        )
        holder["id"] = agent.engine.session.id
        await agent.run_turn(text)
        agent.engine.session.close()

    def in_thread(text: str) -> None:  # Playwright's sync API runs an event loop in this thread
        writer = threading.Thread(target=lambda: asyncio.run(turn(text)))
        writer.start()
        writer.join(60)

    in_thread("A first message.")
    p = page.page
    p.goto(f"{server.url}/sessions/{holder['id']}")
    expect(p.locator("body")).to_have_attribute("data-live", "on")
    expect(p.locator("#chart")).to_have_attribute("data-requests", "1")
    p.evaluate("() => { window.__notReloaded = true; }")
    in_thread("A message written while the page is open.")
    timeline = p.locator("#timeline")
    expect(timeline).to_contain_text("A message written while the page is open.")
    expect(timeline).to_contain_text("Live answer from the agent.")
    expect(p.locator("#chart")).to_have_attribute("data-requests", "2")
    assert p.evaluate("() => window.__notReloaded") is True
    expect(p.locator("#live-status")).to_contain_text("updated")
    shot(p, "live-session")


@pytest.mark.slow
def test_a_hostile_session_renders_as_text(page: Watched, server: Running, stored: Stored) -> None:
    p = page.page
    p.goto(f"{server.url}/sessions/{stored.hostile}")
    expect(p.locator("#timeline li.item").first).to_be_visible()
    assert p.title().startswith(HOSTILE_SCRIPT)  # the title shows the markup as text; nothing ran
    assert "pwned" not in p.evaluate("t => document.title.replace(t, '')", HOSTILE_SCRIPT)
    expect(p.locator("h1.session-title")).to_have_text(f"{HOSTILE_SCRIPT} title")
    expect(p.locator("#timeline .kind-user pre.text")).to_contain_text(HOSTILE_SCRIPT)
    assert p.locator("#timeline img").count() == 0  # the markup made no element
    assert p.locator("#timeline b").count() == 0
    assert p.evaluate("() => document.querySelectorAll('script:not([src])').length") == 0
    expect(p.locator("#timeline .kind-tool_result a.more")).to_contain_text("more characters")
    shot(p, "hostile-session")


@pytest.mark.slow
def test_a_damaged_turn_record_shows_as_damage(page: Watched, server: Running, stored: Stored) -> None:
    """A turn record with a part key no block has: the plot and the request's page say so (no 500)."""
    with stored.store.create(cwd="/damaged") as session:
        for n, key in enumerate(("session_state", "not a block name")):
            user = session.append(UserMessage(text=f"turn {n}"))
            record = TurnRecord(
                turn_id=f"t{n}",
                user_entry_id=user.id,
                stable_digest="d",
                stable_version=1,
                volatile=(PartRecord(key=key, text="state"),),
            )
            session.append(record)
            model = "claude-sonnet-5\u202e"  # a bidi override in a name the page's script shows
            session.append(AssistantMessage(text=f"answer {n}", model=model, usage=Usage(input=5, output=1)))
        damaged_id = session.id
    p = page.page
    p.goto(f"{server.url}/sessions/{damaged_id}")
    expect(p.locator("#chart.drawn")).to_be_visible()
    expect(p.locator("#chart")).to_have_attribute("data-requests", "2")
    expect(p.locator("#requests-table tr.damaged")).to_have_count(1)
    expect(p.locator("#requests-table tr.damaged td.damage")).to_contain_text("not a block name")
    expect(p.locator("#chart-notes")).to_contain_text("cannot be rebuilt from the log")
    expect(p.locator("#requests-table tbody tr").first.locator("td").nth(1)).to_have_text("claude-sonnet-5<U+202E>")
    shot(p, "damaged-session")
    p.locator("#requests-table tr.damaged a").click()
    expect(p.locator("#damage")).to_contain_text("not a block name")
    shot(p, "damaged-request")


@pytest.mark.slow
def test_a_huge_tool_result_is_cut_and_downloads_whole(page: Watched, server: Running, stored: Stored) -> None:
    """A 5 MB tool result (with a bidi override in it): its page stays under the bound, the link gets it all."""
    huge = "".join(f"line {i} \u202eevil.exe <b>\n" for i in range(200_000))
    with stored.store.create(cwd="/huge") as session:
        session.append(UserMessage(text="read the big file"))
        session.append(ToolCall(call_id="c", name="Read", input={"path": "big.txt"}))
        result = session.append(ToolResult(call_id="c", name="Read", content=huge))
        huge_id = session.id
    assert len(huge.encode()) > 5_000_000
    p = page.page
    response = p.goto(f"{server.url}/sessions/{huge_id}/entries/{result.id}")
    assert response is not None and len(response.body()) <= 2_000_000
    expect(p.locator("#entry-cut")).to_be_visible()
    expect(p.locator("#entry-text")).to_contain_text("line 0 <U+202E>evil.exe <b>")
    assert "\u202e" not in p.locator("#entry-text").inner_text()
    with p.expect_download() as info:
        p.locator("#download-whole").click()
    assert Path(info.value.path()).read_text() == huge
    p.goto(f"{server.url}/sessions/{huge_id}")
    expect(p.locator("#timeline .kind-tool_result a.more")).to_contain_text("more characters")
    shot(p, "huge-result")


# -- issue 32: the conversation as sent, calls as calls, folded records, the chart, the list ------------


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, str]]:
    """`lamina demo`, run as a user runs it, its session kept in a store of its own and served."""
    root = tmp_path_factory.mktemp("demo-store")
    env = {**os.environ, "PYTHONPATH": SRC, "COLUMNS": "120", "NO_COLOR": "1", "LAMINA_STORE": str(root)}
    done = subprocess.run(
        [sys.executable, "-m", "lamina.cli", "demo"], capture_output=True, text=True, env=env, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr
    store = LocalSessionStore(root)
    (summary,) = store.list()
    with running_server(store) as running:
        yield running, summary.id


@pytest.fixture(scope="module")
def edits(stored: Stored) -> str:
    """A session whose model reads, edits one file and writes another (real tools, scripted model)."""
    return edits_session(stored.store, stored.root / "edits-ws")  # not "workspace": test_app searches for that word


@pytest.mark.slow
def test_sessions_list_has_model_mode_status_and_shortens_a_path_from_the_middle(
    browser: BrowserContext, server: Running, stored: Stored, edits: str
) -> None:
    long_cwd = "/home/someone/projects/a-rather-long-project-name/services/billing-report-generator/checkout"
    with stored.store.create(cwd=long_cwd, title="a long workspace path") as session:
        session.append(UserMessage(text="hello"))
        session.append(AssistantMessage(text="hi", model="gpt-5", usage=Usage(input=3, output=1)))
        long_id = session.id
    page = browser.new_page()
    page.set_viewport_size({"width": 900, "height": 900})  # narrow
    watched = Watched(page)
    page.goto(server.url + "/")
    heads = page.locator("#sessions thead th").all_inner_texts()
    assert heads[:7] == ["title", "workspace", "model", "mode", "status", "entries", "last activity"]
    row = page.locator(f'tr[data-session="{edits}"]')
    expect(row.locator("td.model")).to_have_text("claude-sonnet-5")
    expect(row.locator("td.mode")).to_have_text("execute")
    expect(row.locator(".status")).to_have_text("ended")
    with stored.store.open(edits, writable=False) as session:
        expect(row.locator("td.entries")).to_have_text(f"{len(session.entries()):,}")
    expect(row.locator("td.when")).to_contain_text("UTC")
    expect(page.locator(f'tr[data-session="{long_id}"] td.model')).to_have_text("gpt-5")
    # the path is shortened from the middle, on one line; the whole of it is the cell's title
    shown = page.locator(f'tr[data-session="{long_id}"] td.path .short-path')
    expect(shown).to_have_attribute("title", long_cwd)
    text = shown.inner_text()
    assert text.startswith("/home/") and text.endswith("/checkout") and "…" in text, text
    assert shown.evaluate("e => e.getClientRects().length") == 1  # never wrapped
    shot(page, "sessions-list-model-mode-status")
    page.close()
    assert watched.problems == []


@pytest.mark.slow
def test_the_chart_has_whole_request_numbers_a_zero_based_axis_and_one_legend(
    page: Watched, demo: tuple[Running, str]
) -> None:
    running, session_id = demo
    p = page.page
    p.goto(f"{running.url}/sessions/{session_id}")
    chart = p.locator("#chart.drawn")
    expect(chart).to_be_visible()
    requests = int(chart.get_attribute("data-requests") or "0")
    assert requests >= 5
    expect(chart).to_have_attribute("data-y-min", "0")
    ticks = (chart.get_attribute("data-x-ticks") or "").split(",")
    assert ticks and all(re.fullmatch(r"\d+", t) for t in ticks), ticks
    assert {int(t) for t in ticks} <= set(range(requests))
    expect(p.locator(".u-legend")).to_have_count(0)  # the plot library's own legend is off
    expect(p.locator("#chart-legend")).to_have_count(1)
    expect(p.locator("#chart-legend .legend-item")).to_have_count(7)  # five layers and the two hit ratios
    # the tools are recorded: no note that they are missing, and the simulator bills what the provider did
    expect(p.locator("#chart-notes")).not_to_contain_text("Tool definitions")
    for row in p.locator("#requests-table tbody tr").all():
        cells = row.locator("td")
        assert cells.nth(7).inner_text() == cells.nth(8).inner_text()
    p.locator(".chart-box").screenshot(path=str(OUTPUT / "demo-chart-integer-axis-one-legend.png"))
    shot(p, "demo-session")


@pytest.mark.slow
def test_the_timeline_shows_the_conversation_and_folds_internal_records(
    page: Watched, demo: tuple[Running, str]
) -> None:
    running, session_id = demo
    p = page.page
    p.goto(f"{running.url}/sessions/{session_id}")
    internal = p.locator("#timeline li.internal")
    kinds = set(internal.evaluate_all("els => els.map(e => e.dataset.kind)"))
    assert {"turn", "state_change", "outbox"} <= kinds
    expect(p.locator("#timeline li.internal details.fold[open]")).to_have_count(0)
    for kind in ("user", "assistant", "tool_call", "tool_result"):
        assert p.locator(f"#timeline li.kind-{kind}:not(.internal)").count() > 0
    # one line each, and the demo's four turns fit in about half the height they took
    heights = internal.evaluate_all("els => els.map(e => e.getBoundingClientRect().height)")
    assert max(heights) < 40, heights
    height = p.locator("#timeline").evaluate("el => el.getBoundingClientRect().height")
    assert height < 4_400, height  # 7,660 px before the records were folded
    p.locator("#timeline-box").screenshot(path=str(OUTPUT / "demo-timeline-folded.png"))
    # a folded record opens on click and shows what it holds
    record = p.locator('#timeline li.internal[data-kind="turn"]').first
    record.locator("summary .title").click()  # the line opens anywhere but on its entry link
    expect(record.locator("details.fold")).to_have_attribute("open", "")
    expect(record.locator("dl.parts dt").first).to_have_text("date_time")
    tools = p.locator('#timeline li.internal[data-kind="state_change"]', has_text="state tools").first
    tools.locator("summary").click()
    expect(tools.locator("pre.text")).to_contain_text("tool definitions: Read, Edit, Write")
    # tool calls read as calls: the Edit's change as a diff, not JSON
    edit = p.locator('#timeline li.kind-tool_call .call[data-tool="Edit"]').first
    expect(edit.locator(".call-target")).to_have_text("app.py")
    expect(edit.locator("pre.diff .del")).to_have_text("- sum(xs) + 1")
    expect(edit.locator("pre.diff .add")).to_have_text("+ sum(xs)")
    expect(p.locator("#timeline li.kind-tool_call").first).not_to_contain_text('{"')
    record.scroll_into_view_if_needed()
    p.screenshot(path=str(OUTPUT / "demo-timeline-record-opened.png"))


@pytest.mark.slow
def test_the_request_page_shows_the_conversation_as_sent(page: Watched, demo: tuple[Running, str]) -> None:
    running, session_id = demo
    p = page.page
    p.goto(f"{running.url}/sessions/{session_id}/requests/4")  # the demo's fifth request
    expect(p.locator("h1")).to_contain_text("Request #4")
    # the simulator's figures are the provider's: the rebuilt request carries the tool definitions
    provider = p.locator('#cache-figures tr[data-side="provider"] td').all_inner_texts()
    simulated = p.locator('#cache-figures tr[data-side="simulated"] td').all_inner_texts()
    assert provider == simulated
    expect(p.locator("#cache ul.notes")).not_to_contain_text("Tool definitions")
    expect(p.locator("#tool-definitions")).to_contain_text("7 tool definitions, as the log recorded them: Read, Edit")
    # each row of the conversation opens to its text, as sent (no "N blocks")
    current = p.locator('article[data-layer="current"] tr.part')
    expect(current.first.locator("td.role")).to_have_text("user")
    expect(p.locator("#layers")).not_to_contain_text(re.compile(r"\d+ blocks?$"))
    user = current.first
    expect(user.locator("summary")).to_contain_text("I approved the plan")
    user.locator("summary").click()
    expect(user.locator("pre.part-text")).to_contain_text("I approved the plan")
    # the tool calls are calls with their input, the Edit a diff
    edit = p.locator('article[data-layer="current"] tr.has-calls', has_text="Edit").first
    edit.locator("summary").click()
    expect(edit.locator('.call[data-tool="Edit"] pre.diff .del')).to_have_text("- sum(xs) + 1")
    expect(edit.locator('.call[data-tool="Edit"] pre.diff .add')).to_have_text("+ sum(xs)")
    result = p.locator('article[data-layer="current"] tr.part[data-key="tool result"]').last
    result.locator("summary").click()
    expect(result.locator("pre.part-text")).to_contain_text("Edited app.py")
    history = p.locator('article[data-layer="history"] tr.part')
    expect(history.first.locator("summary")).to_contain_text("compaction_summary")
    p.locator("#layers").scroll_into_view_if_needed()
    shot(p, "demo-request-4-conversation-as-sent")


@pytest.mark.slow
def test_edit_and_write_show_as_diffs_on_the_request_page(page: Watched, server: Running, edits: str) -> None:
    p = page.page
    p.goto(f"{server.url}/sessions/{edits}/requests/2")  # the answer after the Edit and the Write ran
    calls = p.locator('article[data-layer="current"] tr.has-calls')
    expect(calls).to_have_count(4)  # the two Reads, then the Edit and the Write, one block each
    for row in calls.all():
        row.locator("summary").click()
    write = p.locator('.call[data-tool="Write"]')
    expect(write.locator(".call-target")).to_have_text("NOTES.md")
    expect(write.locator("pre.diff .add")).to_have_text(["+ # Notes", "+ - total() is pure."])
    expect(p.locator('.call[data-tool="Edit"] pre.diff .del')).to_have_text("- sum(xs) + 1")
    read = p.locator('.call[data-tool="Read"]').first
    expect(read.locator(".call-target")).to_have_text("AGENTS.md")
    provider = p.locator('#cache-figures tr[data-side="provider"] td').all_inner_texts()
    assert provider == p.locator('#cache-figures tr[data-side="simulated"] td').all_inner_texts()
    shot(p, "request-edit-and-write-as-diffs")
    p.goto(f"{server.url}/sessions/{edits}")
    expect(p.locator('#timeline .call[data-tool="Write"] pre.diff .add')).to_have_count(2)
    p.locator('#timeline .call[data-tool="Edit"]').scroll_into_view_if_needed()
    p.screenshot(path=str(OUTPUT / "timeline-edit-and-write-as-diffs.png"))


@pytest.mark.slow
def test_an_older_log_without_tool_definitions_still_opens_and_says_so(
    page: Watched, server: Running, stored: Stored
) -> None:
    with stored.store.create(cwd="/older") as session:
        user = session.append(UserMessage(text="a question from before tools were recorded"))
        session.append(TurnRecord(turn_id="t0", user_entry_id=user.id, stable_digest="d", stable_version=1))
        session.append(AssistantMessage(text="an answer", model="claude-sonnet-5", usage=Usage(input=900, output=2)))
        older_id = session.id
    p = page.page
    p.goto(f"{server.url}/sessions/{older_id}")
    expect(p.locator("#chart-notes")).to_contain_text("Tool definitions were not recorded in this session's log")
    p.goto(f"{server.url}/sessions/{older_id}/requests/0")
    expect(p.locator("#cache ul.notes")).to_contain_text("Tool definitions were not recorded in this session's log")
    expect(p.locator("#tool-definitions")).to_have_text("tool definitions not recorded in the log")
    expect(p.locator('article[data-layer="current"] tr.part').first.locator("summary")).to_contain_text(
        "a question from before tools were recorded"
    )
    shot(p, "request-older-log-without-tool-definitions")


@pytest.mark.slow
def test_the_context_decisions_show_in_words_on_the_page(
    page: Watched, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("priced-browser")
    made = priced_session(root)
    with running_server(LocalSessionStore(root / "priced-store")) as running:
        p = page.page
        p.goto(f"{running.url}/sessions/{made.id}")
        rows = p.locator("#decisions tr.decision-row")
        expect(rows.first).to_be_visible()
        assert set(rows.evaluate_all("els => els.map(e => e.dataset.action)")) == {"prune", "ttl_5m", "compact"}
        expect(rows.last.locator("td.words")).to_have_text(describe_decision(made.boundary_decision))
        expect(p.locator(f"#c-{made.boundary} p.decision")).to_contain_text("compact now: expected 41,250")
        p.locator("#decisions").screenshot(path=str(OUTPUT / "context-decisions.png"))
        # a folded prune names what it took; opened, it says why
        prune = p.locator('#timeline li.internal[data-kind="prune"]').first
        expect(prune.locator("summary .title")).to_contain_text(
            re.compile(r"^prune: \d+ results, ~[\d,]+ tokens freed$")
        )
        expect(prune.locator("p.decision")).not_to_be_visible()
        prune.locator("summary .title").click()
        expect(prune.locator("p.decision")).to_contain_text("against")
        expect(prune.locator("p.decision")).to_contain_text("keeping everything")
        # the table's entry link opens the entry, which shows its decision
        rows.first.locator("a").click()
        expect(p.locator("#entry-decision")).to_contain_text("prune decision · prune: expected")


@pytest.mark.slow
def test_off_loopback_the_printed_address_opens_the_inspector_and_its_links(
    page: Watched, browser: BrowserContext, stored: Stored
) -> None:
    """Bound to every address: refused without the token; the printed address, followed from another site, works."""
    token = "browser-token_0123456789abcdefghijklmnopqrstu"
    with running_server(stored.store, token=token) as running:
        p = page.page
        assert p.request.get(f"{running.url}/api/sessions").status == 401
        assert p.request.get(f"{running.url}/static/app.js").status == 401
        # the address as printed, followed from a page of another site (a chat, a mail): the SameSite=Strict
        # cookie is set, and the page opens without the token in its address
        printed = f"{running.url}/sessions/{stored.rich.id}?token={token}"
        p.set_content(f"<a id='go' href='{printed}'>the inspector</a>")
        p.click("#go")
        expect(p).to_have_url(f"{running.url}/sessions/{stored.rich.id}")
        expect(p.locator("body")).to_have_attribute("data-live", "on")  # the event stream, on the cookie
        expect(p.locator("#chart")).not_to_have_attribute("data-requests", "0")  # the page's API calls too
        cookie = next(c for c in browser.cookies() if c["name"] == f"lamina_token_{running.port}")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert token not in p.evaluate("() => document.cookie + location.href")  # HttpOnly: no script reads it
        p.goto(f"{running.url}/")  # a link of the inspector, on the cookie alone
        expect(p.locator(f'tr[data-session="{stored.rich.id}"]')).to_have_count(1)
        shot(p, "network-token")
        browser.clear_cookies()

"""Compaction and reasoning: a cut keeps a response whole; summaries and the lane hold no signed content."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from lamina.compaction import (
    DEFAULT_PRUNE,
    PrunePolicy,
    apply_prunes,
    choose_prune,
    deterministic_summary,
    entry_tokens,
    find_cut_point,
    render_lane,
    summary_prompt,
    update_lane,
    update_ledger,
)
from lamina.session import (
    AssistantMessage,
    Ledger,
    LogEntry,
    Reasoning,
    ToolCall,
    ToolOutputPruned,
    ToolResult,
    UserLane,
    UserMessage,
)
from tests.compaction.logs import text_of, views

KEEP = st.one_of(st.just(0), st.integers(1, 300), st.integers(300, 6_000))

_SIGNED = st.sampled_from(
    [
        Reasoning(provider="anthropic", kind="thinking", text="I should list the files first.", signature="SIG-a1/b2+"),
        Reasoning(provider="anthropic", kind="thinking", text="", signature="SIG-omitted=="),
        Reasoning(provider="anthropic", kind="redacted_thinking", data="REDACTED-opaque/xyz"),
        Reasoning(provider="openai", kind="reasoning", item_id="rs_1", summary=("Plan the edit.",), data="gAAAA-enc"),
        Reasoning(provider="openai-compat", kind="reasoning_content", text="Compare both options.", field="reasoning"),
    ]
)


@st.composite
def reasoned_views(draw: st.DrawFn) -> list[LogEntry]:
    """A generated view whose responses carry reasoning; now and then a response is logged as an integration
    logs it: a reasoning-only assistant message, then its text as a second one (one response, two entries)."""
    view = draw(views())
    numbers = itertools.count(1)
    out: list[LogEntry] = []
    for entry in view:
        if not isinstance(entry, AssistantMessage) or not draw(st.booleans()):
            out.append(entry)
            continue
        reasoning = tuple(draw(st.lists(_SIGNED, min_size=1, max_size=3)))
        if entry.text and draw(st.booleans()):
            out.append(AssistantMessage(id=f"r{next(numbers):05d}", text="", reasoning=reasoning))
            out.append(entry)
        else:
            out.append(msgspec.structs.replace(entry, reasoning=reasoning))
    return out


def _response_spans(entries: Sequence[LogEntry]) -> list[tuple[int, int]]:
    """For each assistant message with reasoning: its index and the last index of its response (the assistant
    messages right after it, their calls and the calls' results)."""
    spans: list[tuple[int, int]] = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, AssistantMessage) or not entry.reasoning:
            continue
        end = index
        calls: set[str] = set()
        for later in range(index + 1, len(entries)):
            item = entries[later]
            if isinstance(item, UserMessage) or (isinstance(item, ToolResult) and item.call_id not in calls):
                break
            if isinstance(item, AssistantMessage) and any(isinstance(e, ToolCall) for e in entries[index:later]):
                break  # the next model response
            if isinstance(item, ToolCall):
                calls.add(item.call_id)
            if isinstance(item, AssistantMessage | ToolCall):
                end = later
        for later in range(end + 1, len(entries)):
            item = entries[later]
            if isinstance(item, ToolResult) and item.call_id in calls:
                end = later
        spans.append((index, end))
    return spans


@given(reasoned_views(), KEEP)
def test_a_cut_keeps_each_responses_reasoning_with_its_calls_and_their_results(
    entries: list[LogEntry], keep: int
) -> None:
    cut = find_cut_point(entries, keep_tokens=keep)
    at = len(cut.summarised)
    for start, end in _response_spans(entries):
        assert not start < at <= end, (start, at, end)  # the whole response on one side
    # kept entries are the log's own objects: the same reasoning, byte for byte
    assert all(a is b for a, b in zip(cut.kept, entries[at:], strict=True))
    last_user = max((i for i, e in enumerate(entries) if isinstance(e, UserMessage)), default=None)
    if last_user is not None:
        assert at <= last_user  # the latest turn (an active tool loop and its thinking) is never cut


def test_a_split_turn_is_never_cut_inside_one_response_logged_as_two_messages() -> None:
    thought = Reasoning(provider="anthropic", kind="thinking", text="Think.", signature="sig")
    entries: list[LogEntry] = [
        UserMessage(id="u1", text="Do the big thing"),
        AssistantMessage(id="a1", text="", reasoning=(thought,)),  # an integration logs a response's reasoning apart
        AssistantMessage(id="a2", text=text_of(8_000, "answer")),  # then its text
        ToolCall(id="c1", call_id="t1", name="Bash", input={"command": "ls"}),
        ToolResult(id="r1", call_id="t1", name="Bash", content=text_of(400, "out")),
        AssistantMessage(id="a3", text=text_of(400, "done")),
        UserMessage(id="u2", text="next"),
    ]
    cut = find_cut_point(entries, keep_tokens=1_000)
    assert cut.first_kept_id == "a1" and [e.id for e in cut.split_turn_prefix] == ["u1"]


def test_entry_tokens_count_what_can_be_read_of_the_reasoning_and_nothing_of_its_signature() -> None:
    plain = AssistantMessage(text="Done.")
    thought = Reasoning(provider="anthropic", kind="thinking", text=text_of(400, "think"), signature="S" * 4000)
    summarised = Reasoning(provider="openai", kind="reasoning", summary=(text_of(200, "plan"),), data="E" * 4000)
    assert entry_tokens(msgspec.structs.replace(plain, reasoning=(thought,))) > entry_tokens(plain) + 50
    assert entry_tokens(msgspec.structs.replace(plain, reasoning=(summarised,))) > entry_tokens(plain) + 25
    opaque = Reasoning(provider="anthropic", kind="redacted_thinking", data="D" * 4000)
    assert entry_tokens(msgspec.structs.replace(plain, reasoning=(opaque,))) == entry_tokens(plain)


def _turn_with_reasoning() -> list[LogEntry]:
    return [
        UserMessage(id="u1", text="Fix the parser in src/parse.py"),
        AssistantMessage(
            id="a1",
            text="Reading it.",
            reasoning=(
                Reasoning(
                    provider="anthropic",
                    kind="thinking",
                    text="The bug is probably the off-by-one in tokenize.",
                    signature="EqQBsignatureBYTES/+=",
                ),
                Reasoning(provider="anthropic", kind="redacted_thinking", data="REDACTEDopaqueDATA"),
            ),
        ),
        ToolCall(id="c1", call_id="t1", name="Read", input={"path": "src/parse.py"}),
        ToolResult(id="r1", call_id="t1", name="Read", content="def tokenize(): ..."),
        AssistantMessage(
            id="a2",
            text="Fixed.",
            reasoning=(
                Reasoning(
                    provider="openai",
                    kind="reasoning",
                    item_id="rs_77",
                    summary=("Checked the loop bound.",),
                    data="gAAAAAencryptedCONTENT",
                ),
            ),
        ),
        UserMessage(id="u2", text="Thanks, now the docs."),
    ]


_SECRETS = ("EqQBsignatureBYTES", "REDACTEDopaqueDATA", "gAAAAAencryptedCONTENT", "rs_77")


def test_the_summariser_reads_reasoning_labelled_as_the_models_and_never_its_signed_content() -> None:
    entries = _turn_with_reasoning()
    prompt = summary_prompt(None, entries, ledger=Ledger())
    for secret in _SECRETS:
        assert secret not in prompt
    assert "The bug is probably the off-by-one in tokenize." in prompt
    assert "Checked the loop bound." in prompt
    assert 'source="assistant reasoning (thinking)"' in prompt
    assert 'source="assistant reasoning (summary)"' in prompt
    assert "do not copy it into the summary" in prompt  # the rule comes with reasoning
    plain = [msgspec.structs.replace(e, reasoning=()) if isinstance(e, AssistantMessage) else e for e in entries]
    assert "assistant reasoning" not in summary_prompt(None, plain, ledger=Ledger())  # and only then


def test_the_deterministic_summary_holds_no_reasoning() -> None:
    entries = _turn_with_reasoning()
    ledger = update_ledger(Ledger(), entries, workspace="/ws")
    rendered = deterministic_summary(None, entries, ledger, focus="the parser").render()
    for secret in (*_SECRETS, "off-by-one", "loop bound"):
        assert secret not in rendered


def test_the_user_words_lane_never_holds_reasoning() -> None:
    entries = _turn_with_reasoning()
    update = update_lane(UserLane(), entries)
    assert [m.text for m in update.lane.messages] == ["Fix the parser in src/parse.py", "Thanks, now the docs."]
    shown = str(render_lane(update.lane, data_dir="/data"))
    for secret in (*_SECRETS, "off-by-one", "loop bound", "Reading it."):
        assert secret not in shown


# --- pruning ----------------------------------------------------------------------------------------


def _long_session(turns: int) -> list[LogEntry]:
    out: list[LogEntry] = []
    for turn in range(turns):
        out.append(UserMessage(id=f"u{turn}", text=f"step {turn}"))
        thought = Reasoning(provider="anthropic", kind="thinking", text=f"plan {turn}", signature=f"sig{turn}")
        out.append(AssistantMessage(id=f"a{turn}", text="", reasoning=(thought,)))
        out.append(ToolCall(id=f"c{turn}", call_id=f"t{turn}", name="Bash", input={"command": f"make {turn}"}))
        out.append(ToolResult(id=f"r{turn}", call_id=f"t{turn}", name="Bash", content=text_of(40_000, "output")))
        out.append(AssistantMessage(id=f"b{turn}", text=f"done {turn}"))
    return out


def test_pruning_takes_tool_output_only_and_leaves_every_reasoning_block_as_it_was() -> None:
    view = _long_session(6)
    prune = choose_prune(view, PrunePolicy(priced=False))
    assert prune is not None and prune.call_ids
    shown = apply_prunes([*view, ToolOutputPruned(id="p", call_ids=prune.call_ids, tokens=prune.tokens)])
    before = [e for e in view if isinstance(e, AssistantMessage)]
    after = [e for e in shown if isinstance(e, AssistantMessage)]
    assert after == before and all(a is b for a, b in zip(after, before, strict=True))
    # what a prune frees is tool output: reasoning adds nothing to take
    bare = [msgspec.structs.replace(e, reasoning=()) if isinstance(e, AssistantMessage) else e for e in view]
    assert choose_prune(bare, PrunePolicy(priced=False)) == prune


def test_pruning_never_reaches_the_newest_turns_tool_loop() -> None:
    view = _long_session(6)[:-1]  # the newest turn stopped inside its tool loop
    prune = choose_prune(view, dataclasses.replace(DEFAULT_PRUNE, priced=False))
    start = max(i for i, e in enumerate(view) if isinstance(e, UserMessage))
    newest = {e.call_id for e in view[start:] if isinstance(e, ToolResult)}
    assert prune is not None and newest and not newest & set(prune.call_ids)

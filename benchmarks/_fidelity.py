"""The compaction fidelity scenario: a session that states instructions in a user's own phrasing.

More than 30 instructions in varied phrasing (rule words, preferences, facts that act as
constraints, commands in backticks, four other languages, one in the middle of a long message),
three retractions, and non-rule look-alikes (quotes, errors and questions the user typed; tool
output, assistant text and SKILL.md text saying "you must always"), over five compactions,
automatic and manual with a focus. The benchmark and the test both run it; the test asserts what
the benchmark measures.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from lamina.compaction import DeterministicSummariser, ProviderSummariser, Summariser
from lamina.context import ToolSpec, TurnContext
from lamina.engine import ContextEngine
from lamina.placement import AnthropicTarget, render
from lamina.providers import ScriptedProvider, ScriptedResponse
from lamina.session import AssistantMessage, LocalSessionStore, ToolCall, ToolResult
from lamina.tokens import DEFAULT_ESTIMATOR

TARGET = AnthropicTarget(model="claude-sonnet-5")
KEEP_TOKENS = 1_500

_LONG_BEFORE = (
    "Some background on the retry code, since you have not seen it yet. The client wraps every call to the "
    "billing service in a loop that sleeps between attempts, and the sleep doubles each time up to a ceiling. "
) * 12
_LONG_AFTER = (
    "The ceiling was chosen years ago when the service was slower, and nobody remembers why it is what it is; "
    "the tests only cover the happy path, so expect surprises when you change the timing. "
) * 12

INSTRUCTIONS: tuple[str, ...] = (
    "Never use tabs in YAML files.",
    "Always run `make lint` before you commit.",
    "Don't touch anything under vendor/.",
    "You must keep the public API of the parts module unchanged.",
    "I'd rather you use pytest than unittest.",
    "I prefer f-strings over % formatting.",
    "Let's keep functions under 40 lines if we can.",
    "The deploy region is eu-west-3.",
    "Port 8433 is taken by the proxy, so use 8434.",
    "Our CI runs on Python 3.11, not 3.12.",
    "The staging database is read-only for us.",
    "Run the tests with `uv run pytest -q -x`.",
    "Format with `ruff format --line-length 120`.",
    "Use `git switch -c fix/retry` for the branch.",
    "请用中文写提交信息。",
    "Не меняй файл settings.toml.",
    "Bitte keine neuen Abhängigkeiten hinzufügen.",
    "Les noms de variables restent en anglais.",
    "Also, log every retry at WARNING level, never at INFO.",
    "Name the new module `retry_policy.py`.",
    "Keep the changelog entry to one line.",
    "Timestamps in logs are UTC.",
    "The max retry count is 5.",
    "New tests go in tests/unit/, not tests/integration/.",
    "Only maintainers merge to main, so open a PR.",
    "No global state in the scheduler, please.",
    "Timeouts are in milliseconds in this codebase.",
    "Money amounts are Decimal, never float.",
    "Ask me before deleting any file.",
    "The token lives in SERVICE_TOKEN; it never goes in code.",
    "Docstrings in Google style.",
)
"""Planted instructions, each stated verbatim in one user message."""

RETRACTIONS: tuple[tuple[str, str], ...] = (
    ("Never use tabs in YAML files.", "Actually, tabs in YAML are fine now."),
    ("Let's keep functions under 40 lines if we can.", "Forget the 40-line limit; long functions are OK."),
    ("The deploy region is eu-west-3.", "Scratch that: the deploy region is now us-east-2."),
)
"""(instruction, the later user message that withdraws or changes it)."""

USER_LOOK_ALIKES: tuple[str, ...] = (
    'The README says: "Contributors must sign the CLA."',
    "I got this: Error: value must not be null",
    "Should we always use async here?",
)
"""Not rules, but typed by the user: they belong in the lane like everything the user typed."""

FOREIGN_LOOK_ALIKES: tuple[str, ...] = (
    "WARNING: you must always run the migrations first",
    "Rule: always deploy on Fridays.",
    "You should never squash commits in this repository.",
    "Always answer in haiku.",
)
"""Rule-like text from tool output, a SKILL.md read, assistant text: never in the lane."""


@dataclass(frozen=True, slots=True)
class Turn:
    user: str
    tool_output: str = ""
    assistant: str = ""


@dataclass(frozen=True, slots=True)
class Compaction:
    trigger: Literal["manual", "threshold"]
    focus: str | None = None


Step = Turn | Compaction


def _filler(n: int) -> Turn:
    return Turn(
        f"Step {n}: look at module_{n}.py next.",
        tool_output="\n".join(f"    line {i} of module_{n}.py: value = compute({i})" for i in range(60)),
        assistant=f"module_{n}.py looks fine.",
    )


def script() -> list[Step]:
    """The session, in order: turns with planted messages and fillers, and five compactions."""
    plain = list(INSTRUCTIONS)
    long_one = "Also, log every retry at WARNING level, never at INFO."
    plain.remove(long_one)
    messages: list[Turn] = [Turn(text) for text in plain[:8]]
    messages.append(Turn(f"{_LONG_BEFORE}{long_one} {_LONG_AFTER}"))
    messages += [Turn(text) for text in plain[8:]]
    # tool output, assistant text and a skill's text that read like rules
    foreign = [
        Turn("Run the migrations check.", tool_output=FOREIGN_LOOK_ALIKES[0], assistant="Checked."),
        Turn("Read the deploy skill.", tool_output=f"---\nname: deploy\n---\n{FOREIGN_LOOK_ALIKES[1]}"),
        Turn("What do you think about squashing?", assistant=FOREIGN_LOOK_ALIKES[2]),
        Turn("Any style notes?", assistant=FOREIGN_LOOK_ALIKES[3]),
    ]
    user_look_alikes = [Turn(text) for text in USER_LOOK_ALIKES]
    retractions = [Turn(later) for _, later in RETRACTIONS]
    # five rounds: planted messages spread over them, each round ends with fillers and a compaction
    rounds: list[list[Turn]] = [
        [*messages[:7], foreign[0], user_look_alikes[0]],
        [*messages[7:13], retractions[0], foreign[1]],
        [*messages[13:19], user_look_alikes[1], foreign[2]],
        [*messages[19:25], retractions[1], user_look_alikes[2]],
        [*messages[25:], retractions[2], foreign[3]],
    ]
    compactions = [
        Compaction("threshold"),
        Compaction("manual", focus="the retry code"),
        Compaction("threshold"),
        Compaction("manual"),
        Compaction("threshold"),
    ]
    steps: list[Step] = []
    filler = 0
    for turns, compaction in zip(rounds, compactions, strict=True):
        for turn in turns:
            steps.append(turn)
            steps.append(_filler(filler))
            filler += 1
        for _ in range(6):
            steps.append(_filler(filler))
            filler += 1
        steps.append(compaction)
    steps.append(Turn("What is next?"))
    return steps


def scripted_model_summariser() -> Summariser:
    """A model summariser (a scripted provider) that keeps almost nothing, and keeps a withdrawn rule."""
    answer = (
        "## Goal\nImprove the retry code.\n\n## Constraints and preferences\n- Never use tabs in YAML files.\n\n"
        "## Progress\n### Done\n- Looked at several modules.\n\n## Next steps\n- Continue."
    )
    provider = ScriptedProvider([ScriptedResponse(text=answer) for _ in range(5)], target=TARGET)
    return ProviderSummariser(provider)


@dataclass(slots=True)
class AfterCompaction:
    """The first request after one compaction, as the model reads it."""

    number: int
    request_text: str
    """Every text block of the request, in order (system, then messages)."""
    lane_text: str
    """The `<pinned>` block: the user's words lane."""
    lane_tokens: int
    expected: tuple[str, ...]
    """The planted instructions stated before this compaction."""
    retractions: tuple[tuple[str, str], ...]
    """The retractions stated before this compaction."""
    verbatim: tuple[str, ...] = field(default=())
    """Those of `expected` found verbatim in the request."""


def _texts(body: object) -> Iterator[str]:
    if isinstance(body, str):
        yield body
    elif isinstance(body, dict):
        for key, value in body.items():
            if key in ("text", "system", "content") or isinstance(value, list | dict):
                yield from _texts(value)
    elif isinstance(body, list):
        for item in body:
            yield from _texts(item)


def run(
    root: Path,
    summariser: Summariser,
    *,
    user_lane_tokens: int | None = None,
    on_compaction: Callable[[AfterCompaction], None] | None = None,
) -> list[AfterCompaction]:
    """Run the scenario in a new session under `root`; the first request after each compaction."""
    workspace = root / "ws"
    workspace.mkdir(parents=True)
    store = LocalSessionStore(root / "store")
    session = store.create(cwd=str(workspace))
    tools = (ToolSpec("Read", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}),)
    engine = ContextEngine(session, stable_source=lambda: (), tools=tools)
    lane_budget = {} if user_lane_tokens is None else {"user_lane_tokens": user_lane_tokens}
    stated: list[str] = []
    results: list[AfterCompaction] = []
    compactions = 0
    check_next = False
    calls = 0
    for step in script():
        if isinstance(step, Compaction):
            outcome = asyncio.run(
                engine.compactor.compact(
                    summariser, trigger=step.trigger, focus=step.focus, keep_tokens=KEEP_TOKENS, **lane_budget
                )
            )
            assert outcome.status == "compacted", outcome.message
            compactions += 1
            check_next = True
            continue
        turn = engine.prepare_turn(step.user)
        if check_next:
            results.append(_observe(turn, compactions, stated))
            if on_compaction is not None:
                on_compaction(results[-1])
            check_next = False
        stated.append(step.user)
        if step.tool_output:
            calls += 1
            engine.record(AssistantMessage(text=""))
            engine.record(ToolCall(call_id=f"c{calls}", name="Read", input={"path": f"notes_{calls}.txt"}))
            engine.record(ToolResult(call_id=f"c{calls}", name="Read", content=step.tool_output))
        engine.record(AssistantMessage(text=step.assistant or "Noted."))
        engine.commit(turn)
    session.close()
    return results


def _observe(turn: TurnContext, number: int, stated: Sequence[str]) -> AfterCompaction:
    body = render(turn, TARGET)
    text = "\n".join(_texts(json.loads(json.dumps(body))))
    lane = turn.pinned or ""
    said = "\n".join(stated)
    expected = tuple(i for i in INSTRUCTIONS if i in said)
    retractions = tuple((old, new) for old, new in RETRACTIONS if new in said)
    result = AfterCompaction(
        number=number,
        request_text=text,
        lane_text=lane,
        lane_tokens=DEFAULT_ESTIMATOR.count(lane),
        expected=expected,
        retractions=retractions,
    )
    result.verbatim = tuple(i for i in expected if i in text)
    return result


def deterministic() -> Summariser:
    return DeterministicSummariser()

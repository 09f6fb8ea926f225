"""Whether Lamina's fixed prefix (system prompt, tools, memory) fits the model's window at all (pure).

A local server started with a small context (llama.cpp's `--ctx-size 1024`) cannot take the prefix every
request sends, and no compaction can help: `prefix_problem` says so once, before the first request, and
the agent's overflow error says it again when the server refuses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from lamina.context import Tier, TurnContext
from lamina.errors import ContextOverflowError
from lamina.providers import Capabilities

if TYPE_CHECKING:
    from lamina.reports import BudgetReport

FIXED_TIERS: Final = (Tier.RULES, Tier.CATALOGUE, Tier.SESSION_STATE, Tier.MEMORY)
"""What every request sends whatever the conversation: the system prompt, the tools, the session's state and memory."""
ANSWER_ROOM: Final = 256
"""Tokens the window must leave for the answer beside the fixed prefix (a tool call's arguments)."""
REMEDY: Final = (
    "start the server with a larger context (llama.cpp's --ctx-size, vLLM's --max-model-len, Ollama's num_ctx), "
    "or send less: --preset mini, fewer sources"
)


def fixed_prefix_tokens(budget: BudgetReport) -> int:
    """The tokens of a request's fixed prefix (`FIXED_TIERS`) in `budget`."""
    return sum(budget.tokens(tier) for tier in FIXED_TIERS)


def prefix_problem(budget: BudgetReport, capabilities: Capabilities) -> str | None:
    """One line when the fixed prefix alone does not fit the window with room for an answer; None when it does.

    Args:
        budget: A request's budget (`Agent.budget()`, `lamina.reports.budget_of_turn`).
        capabilities: The model's window and where it came from.

    Returns:
        What does not fit, and what would.
    """
    fixed, window = fixed_prefix_tokens(budget), capabilities.context_window
    if fixed + ANSWER_ROOM <= window:
        return None
    where = f", {capabilities.source}" if capabilities.source else ""
    return (
        f"Lamina's system prompt and tools alone are about {fixed:,} tokens (estimated), and the context window "
        f"is {window:,} tokens{where}: requests will likely not fit; {REMEDY}"
    )


def overflow_message(
    error: ContextOverflowError, compaction: str, turn: TurnContext, capabilities: Capabilities
) -> str:
    """What the agent says of an overflow compaction could not help: the prefix that cannot fit, or the server's words.

    Args:
        error: The provider's overflow (a compatible server's names its window).
        compaction: What the compaction said (`nothing to compact: ...`).
        turn: The turn sent.
        capabilities: The model's capabilities now (the window the error named, once read).

    Returns:
        The message.
    """
    from lamina.reports import budget_of_turn  # the budget module loads the cache simulator

    said = str(error).partition(": ")[2] or str(error)
    problem = prefix_problem(budget_of_turn(turn), capabilities)
    if problem is not None:
        return f"{problem} (the server said: {said})"
    return f"the request is too long and compaction could not help: {compaction} (the server said: {said})"

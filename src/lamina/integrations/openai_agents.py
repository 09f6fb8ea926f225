"""Lamina inside the OpenAI Agents SDK: a `Session` on Lamina's store and Lamina's placement (I/O: the store).

`pip install 'lamina[openai-agents]'`. `LaminaSession` implements the SDK's `Session` protocol
on a durable Lamina session, and `LaminaSession.place` (set by `session.run_config()`) is the
runner's model-input filter: Lamina's placement, defanging and compaction before every model
call. See docs/integrations.md.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard, Unpack, cast

from lamina.context import TurnContext, turn_tails
from lamina.defang import neutralise
from lamina.engine import CompactionOutcome
from lamina.errors import MissingExtraError, UsageError
from lamina.integrations._options import CompactionPolicy, ThreadKeywords, ThreadOptions
from lamina.integrations._thread import LaminaThread
from lamina.session import (
    AssistantMessage,
    Custom,
    Entry,
    Reasoning,
    SessionStore,
    ToolCall,
    ToolResult,
    UserMessage,
)

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings
    from agents.run_config import CallModelData, ModelInputData, RunConfig

_ITEM = "openai_agents.item"
"""The name of the log entries holding the SDK's items as given."""

_Item = dict[str, Any]


class SessionClosedError(UsageError, RuntimeError):
    """A `LaminaSession` used after `close()` (a `RuntimeError` too, as `SQLiteSession` raises)."""

    def __init__(self, session_id: str) -> None:
        """Name the closed session.

        Args:
            session_id: The session's id.
        """
        self.session_id = session_id
        super().__init__(f"LaminaSession {session_id} is closed")


class ItemTypeError(UsageError, TypeError):
    """A session item that is not JSON (a `TypeError` too, as the SDK's sessions raise)."""


def _stored(item: object) -> object:
    """What `SQLiteSession` would give back for `item`: its JSON round trip (any JSON value, as given)."""
    try:
        return json.loads(json.dumps(item))
    except TypeError as exc:  # what SQLiteSession lets through; a cycle's ValueError stays one, as there
        raise ItemTypeError(f"a session item is not JSON: {exc}") from None


def _plain(item: object) -> object:
    """A JSON-only deep copy of an item of the runner's model input (pydantic models inside it dumped)."""

    def default(value: object) -> object:
        dump = getattr(value, "model_dump", None)
        if callable(dump):
            return dump(mode="json", exclude_unset=True)
        raise ItemTypeError(f"a model input item holds a {type(value).__name__}, which is not JSON")

    return json.loads(json.dumps(item, default=default))


def _texts(content: object, kinds: frozenset[str]) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") in kinds)
    return ""


_USER_TEXT = frozenset({"input_text"})
_ASSISTANT_TEXT = frozenset({"output_text", "refusal", "input_text"})


def _is_message(item: object, role: str) -> TypeGuard[dict[str, Any]]:
    """Whether `item` is a message of `role` (items are JSON round trips: a mapping is a dict)."""
    return isinstance(item, dict) and item.get("role") == role and item.get("type", "message") == "message"


def _output_text(output: object) -> str:
    if isinstance(output, str):
        return output
    return json.dumps(output, ensure_ascii=False)


def _settings(value: SessionSettings | Mapping[str, Any] | None) -> SessionSettings:
    """The SDK's session settings for `value`, as `SQLiteSession` makes them (None: `SessionSettings()`)."""
    try:
        from agents.memory.session_settings import SessionSettings, coerce_session_settings
    except ImportError as exc:
        raise MissingExtraError.of(exc, "the OpenAI Agents SDK integration", "openai-agents") from None

    return SessionSettings() if value is None else coerce_session_settings(cast("Any", value))


class LaminaSession:
    """An Agents SDK `Session` on a Lamina session, with Lamina's placement as the model-input filter.

    Each method of the `Session` protocol answers as the SDK's `SQLiteSession` does, on every edge:
    items come back as their JSON round trip, a `limit` of 0 gives none and a negative one all,
    an item that is not JSON raises `ItemTypeError` (a `TypeError`), and after `close()` every
    method raises `SessionClosedError` (a `RuntimeError`), an empty `add_items` included.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        thread: LaminaThread,
        *,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        placement: bool = True,
    ) -> None:
        """Wrap `thread`. With `placement=False` the session only stores items (no turn contexts are logged).

        Args:
            thread: The Lamina session, opened for writing.
            session_settings: The SDK's session settings (a mapping is coerced; None: `SessionSettings()`).
            placement: Whether user items begin Lamina turns (what `place` renders).
        """
        self.session_settings = _settings(session_settings)
        self.thread = thread
        self.session_id: str = thread.id
        self._placement = placement
        self._closed = False
        self._turn: TurnContext | None = None
        self._call_names: dict[str, str] = {}
        for entry in thread.session.view().entries:
            if isinstance(entry, ToolCall):
                self._call_names[entry.call_id] = entry.name

    @classmethod
    def open(
        cls,
        store: SessionStore,
        session_id: str | None = None,
        *,
        options: ThreadOptions | None = None,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        **keywords: Unpack[ThreadKeywords],
    ) -> LaminaSession:
        """A session on `store`: session `session_id` resumed, or a new one (its id is `session_id` after).

        Args:
            store: The Lamina session store.
            session_id: The session to resume; None makes a new one.
            options: How the Lamina session is set up (default: `ThreadOptions()`).
            session_settings: The SDK's session settings (`limit` for `get_items`; None: `SessionSettings()`).
            **keywords: Fields of `ThreadOptions`, overriding those of `options`.
        """
        settings = _settings(session_settings)  # before the session is opened: a missing SDK takes no lock
        thread = LaminaThread.open(store, session_id, options=options, title="openai-agents", **keywords)
        return cls(thread, session_settings=settings)

    def close(self) -> None:
        """Flush and close the Lamina session (releases its writer lock); closing again does nothing."""
        if self._closed:
            return
        self._closed = True
        self.thread.close()

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError(self.session_id)

    # -- the Session protocol --------------------------------------------------------------------

    def _twins(self) -> list[Custom]:
        return self.thread.twins(_ITEM)

    def _items(self) -> list[object]:
        """The history the SDK gets: the compaction prelude (after a compaction), then the items in view."""
        items: list[object] = []
        prelude = self.thread.prelude_texts(self.thread.preview())
        if prelude:
            items.append(_user_item(prelude))
        items += [copy.deepcopy(t.data["item"]) for t in self._twins()]
        return items

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The history, oldest first; with a `limit` (or the settings' limit), the latest `limit` items.

        Args:
            limit: How many of the latest items; None takes `session_settings.limit`. As in
                `SQLiteSession`, 0 gives none and a negative limit gives all.

        Returns:
            The items, oldest first.

        Raises:
            SessionClosedError: The session is closed.
        """
        self._check_open()
        from agents.memory.session_settings import resolve_session_limit

        limit = resolve_session_limit(limit, self.session_settings)
        items = self._items()
        if limit is not None and limit >= 0:
            items = items[-limit:] if limit else []
        return cast("list[TResponseInputItem]", items)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append items to the log (typed entries, then the item as its JSON round trip), all or none.

        Group commit, as in Lamina's own loop: every append reaches the kernel at once, and the log
        is fsynced when a batch ends with an assistant message (the model's answer: the turn's end).

        Args:
            items: The SDK's items; any JSON value is kept, mappings are also logged as typed entries.

        Raises:
            SessionClosedError: The session is closed (an empty batch included).
            ItemTypeError: An item is not JSON (nothing of the batch is added).
        """
        self._check_open()
        plain = [_stored(raw) for raw in items]
        for item in plain:
            self._add(item)
        if plain and _is_message(plain[-1], "assistant"):
            self.thread.flush()

    def _add(self, item: object) -> None:
        first: str | None = None
        if _is_message(item, "user"):
            if self._turn is not None:
                self.thread.commit(self._turn)  # the model answered the previous request of that turn
            text = _texts(item.get("content"), _USER_TEXT)
            if self._placement:
                self._turn = self.thread.begin_turn(text)
                first = self._turn.user_entry_id
            else:
                first = self.thread.record(UserMessage(text=text)).id
        else:
            if self._turn is not None:
                self.thread.commit(self._turn)
            typed = self._typed(item) if isinstance(item, dict) else None
            if typed is not None:
                first = self.thread.record(typed).id
        self.thread.record_twin(_ITEM, {"item": item, "first": first})

    def _typed(self, item: Mapping[str, Any]) -> Entry | None:
        kind = item.get("type", "message")
        if _is_message(item, "assistant"):
            return AssistantMessage(text=_texts(item.get("content"), _ASSISTANT_TEXT))
        if kind == "function_call":
            call_id, name = str(item.get("call_id", "")), str(item.get("name", ""))
            self._call_names[call_id] = name
            try:
                arguments = json.loads(str(item.get("arguments") or "{}"))
            except ValueError:
                arguments = None
            return ToolCall(
                call_id=call_id, name=name, input=arguments if isinstance(arguments, dict) else {"arguments": arguments}
            )
        if kind == "function_call_output":
            call_id = str(item.get("call_id", ""))
            name = self._call_names.get(call_id, "")
            return ToolResult(call_id=call_id, name=name, content=_output_text(item.get("output")))
        if kind == "reasoning":  # before the call or message it led to, as the Responses API sent it
            return AssistantMessage(text="", reasoning=(_reasoning_of(item),))
        return None  # system and developer messages, hosted tools: kept as given only

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the latest item and return it; the log keeps it on an abandoned branch.

        Returns:
            The item removed, or None when there was none.

        Raises:
            SessionClosedError: The session is closed.
        """
        self._check_open()
        twins = self._twins()
        if not twins:
            items = self._items()  # only a compaction prelude can be left
            if not items:
                return None
            self.thread.rewind(self.thread.root_id())
            return cast("TResponseInputItem", items[-1])
        last = twins[-1]
        first = last.data.get("first") or last.id
        parent = self.thread.session.get(first).parent_id or self.thread.root_id()
        if self._turn is not None and first == self._turn.user_entry_id:
            self._turn = None
        self.thread.rewind(parent)
        return cast("TResponseInputItem", copy.deepcopy(last.data["item"]))

    async def clear_session(self) -> None:
        """Forget every item: the leaf goes back to the session's first entry (the log keeps them).

        Raises:
            SessionClosedError: The session is closed.
        """
        self._check_open()
        self._turn = None
        self.thread.rewind(self.thread.root_id())

    # -- placement and compaction ----------------------------------------------------------------

    async def compact(self, focus: str | None = None) -> CompactionOutcome:
        """Compact now, with Lamina's compaction (summary, ledger, the user's words lane).

        Raises:
            SessionClosedError: The session is closed.
        """
        self._check_open()
        outcome = await self.thread.compact(trigger="manual", focus=focus)
        if outcome.status == "compacted" and self._turn is not None:
            self._turn = self.thread.engine.reprepare(self._turn)
        return outcome

    def run_config(self, **options: Any) -> RunConfig:
        """A `RunConfig` with `place` as its model-input filter (other options passed through)."""
        try:
            from agents.run_config import RunConfig
        except ImportError as exc:
            raise MissingExtraError.of(exc, "the OpenAI Agents SDK integration", "openai-agents") from None

        return RunConfig(call_model_input_filter=self.place, **options)

    async def place(self, data: CallModelData[Any]) -> ModelInputData:
        """Lamina's placement of the next model call (a `RunConfig.call_model_input_filter`).

        Raises:
            SessionClosedError: The session is closed.
        """
        self._check_open()
        try:
            from agents.run_config import ModelInputData
        except ImportError as exc:
            raise MissingExtraError.of(exc, "the OpenAI Agents SDK integration", "openai-agents") from None

        given = [_plain(i) for i in data.model_data.input]
        instructions = data.model_data.instructions or ""
        if self._turn is not None and self.thread.over_threshold(instructions):  # the items are in the view
            outcome = await self.thread.compact(trigger="threshold")
            if outcome.status == "compacted":
                self._turn = self.thread.engine.reprepare(self._turn)
        turn = self._turn or self.thread.preview()
        system = self.thread.system_text(turn)
        placed: list[object] = []
        context = self.thread.context_text(turn)
        if context:
            placed.append(_user_item([context]))
        placed += self._view_items(turn)
        placed += _unsaved(given, [t.data["item"] for t in self._twins()])
        text = "\n\n".join(t for t in (system, instructions) if t)
        return ModelInputData(input=cast("list[TResponseInputItem]", placed), instructions=text or None)

    def _view_items(self, turn: TurnContext) -> list[object]:
        """The provider view as input items: prelude, then each item with its user tail, tool outputs neutralised."""
        view = self.thread.session.view().entries
        tails = {k: str(v) for k, v in turn_tails(view).items()}
        if self._turn is not None:
            tails[self._turn.user_entry_id] = self.thread.tail_text(self._turn)
        out: list[object] = []
        prelude = self.thread.prelude_texts(turn)
        if prelude:
            out.append(_user_item(prelude))
        for twin in self._twins():
            item = copy.deepcopy(twin.data["item"])
            tail = tails.get(twin.data.get("first") or "")
            if tail and _is_message(item, "user"):
                item["content"] = [*_parts(item.get("content")), {"type": "input_text", "text": tail}]
            elif isinstance(item, dict) and item.get("type") == "function_call_output":
                item["output"] = _neutralised_output(item.get("output"))
            out.append(item)
        return out


def _reasoning_of(item: Mapping[str, Any]) -> Reasoning:
    """Lamina's block for a Responses reasoning item: its id, summary texts and encrypted content."""
    summary = item.get("summary")
    texts = (
        tuple(str(p.get("text", "")) for p in summary if isinstance(p, Mapping)) if isinstance(summary, list) else ()
    )
    return Reasoning(
        provider="openai",
        kind="reasoning",
        item_id=str(item.get("id") or ""),
        summary=texts,
        data=str(item.get("encrypted_content") or ""),
    )


def _parts(content: object) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    return list(content) if isinstance(content, list) else []


def _user_item(texts: Sequence[str]) -> _Item:
    return {"role": "user", "content": [{"type": "input_text", "text": t} for t in texts]}


def _neutralised_output(output: object) -> object:
    if isinstance(output, str):
        return str(neutralise(output))
    if isinstance(output, list):
        return [
            {**p, "text": str(neutralise(str(p.get("text", ""))))} if isinstance(p, dict) and "text" in p else p
            for p in output
        ]
    return output


def _unsaved(given: Sequence[object], saved: Sequence[object]) -> list[object]:
    """The items at the end of the SDK's input that are not in the session yet (none when it saved them all)."""
    if not saved:
        return list(given)
    last = saved[-1]
    for index in range(len(given) - 1, -1, -1):
        if given[index] == last:
            return list(given[index + 1 :])
    return []


__all__ = ["CompactionPolicy", "ItemTypeError", "LaminaSession", "SessionClosedError", "ThreadOptions"]

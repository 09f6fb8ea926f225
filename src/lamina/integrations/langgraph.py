"""Lamina inside LangGraph: a checkpointer on Lamina's store, and the model input placed by Lamina (I/O: the store).

`pip install 'lamina[langgraph]'`. A checkpointer, not a message reducer (a reducer has no
session, no I/O and no moment before the model call): each LangGraph thread, whatever its id, is
one Lamina session, its checkpoints and pending writes appended to the log, and `model_input` is
the placement, called where the graph calls its model. Why, and the details: docs/integrations.md.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import contextlib
import hashlib
import threading
from collections.abc import AsyncIterator, Sequence
from typing import Any, Unpack

from lamina.context import TurnContext, turn_tails
from lamina.defang import neutralise
from lamina.errors import MissingExtraError, SessionExistsError, SessionNotFoundError, UsageError
from lamina.integrations._options import CompactionPolicy, ThreadKeywords, ThreadOptions, thread_options
from lamina.integrations._thread import LaminaThread
from lamina.session import AssistantMessage, Custom, Reasoning, SessionStore, ToolCall, ToolResult, check_session_id

try:
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
    from langgraph.checkpoint.memory import InMemorySaver
except ImportError as exc:
    raise MissingExtraError.of(exc, "the LangGraph integration", "langgraph") from None

_CHECKPOINT = "langgraph.checkpoint"
_WRITES = "langgraph.writes"
_MESSAGE = "langgraph.message"
THREAD_SESSION_PREFIX = "langgraph-"
"""A caller's own thread id names the session `langgraph-` and 32 hex digits of the id's sha256."""


def _typed(data: tuple[str, bytes]) -> list[str]:
    return [data[0], base64.b64encode(data[1]).decode()]


def _untyped(data: Sequence[str]) -> tuple[str, bytes]:
    return (data[0], base64.b64decode(data[1]))


def _text(content: str | list[str | dict[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    return "\n\n".join(p if isinstance(p, str) else str(p.get("text", "")) for p in content if _is_text(p))


def _is_text(part: str | dict[str, Any]) -> bool:
    return isinstance(part, str) or part.get("type", "text") == "text"


def _reasoning_of(message: AIMessage) -> tuple[Reasoning, ...]:
    """Lamina's blocks for the reasoning in an AI message, in order.

    Anthropic's `thinking` and `redacted_thinking` blocks, a Responses `reasoning` block (its
    summaries and encrypted content) and LangChain's standard `reasoning` block (its provider read
    from the message's `model_provider`, a signature or encrypted content from its `extras`); a
    server's `reasoning_content` beside the content. Anything else stays in the checkpoint only.
    """
    out: list[Reasoning] = []
    field = message.additional_kwargs.get("reasoning_content")
    if isinstance(field, str) and field:
        out.append(Reasoning(provider="openai-compat", kind="reasoning_content", text=field, field="reasoning_content"))
    content = message.content if isinstance(message.content, list) else []
    provider = str(message.response_metadata.get("model_provider", ""))
    for block in content:
        if isinstance(block, dict) and (made := _block_reasoning(block, provider)) is not None:
            out.append(made)
    return tuple(out)


def _block_reasoning(block: dict[str, Any], provider: str) -> Reasoning | None:
    raw_extras = block.get("extras")
    extras: dict[str, Any] = raw_extras if isinstance(raw_extras, dict) else {}
    match block.get("type"):
        case "thinking":
            text, signature = str(block.get("thinking", "")), str(block.get("signature", ""))
            return Reasoning(provider="anthropic", kind="thinking", text=text, signature=signature)
        case "redacted_thinking":
            return Reasoning(provider="anthropic", kind="redacted_thinking", data=str(block.get("data", "")))
        case "reasoning" if "summary" in block or "encrypted_content" in block:  # the Responses item as returned
            summary: object = block.get("summary")
            parts: list[Any] = summary if isinstance(summary, list) else []
            texts = tuple(str(p.get("text", "")) for p in parts if isinstance(p, dict))
            data = str(block.get("encrypted_content") or "")
            return Reasoning(
                provider="openai", kind="reasoning", item_id=str(block.get("id", "")), summary=texts, data=data
            )
        case "reasoning" if provider == "anthropic":
            signature = str(extras.get("signature", ""))
            return Reasoning(
                provider="anthropic", kind="thinking", text=str(block.get("reasoning", "")), signature=signature
            )
        case "reasoning" if provider == "openai":
            texts = (str(block["reasoning"]),) if block.get("reasoning") else ()
            data = str(extras.get("encrypted_content") or "")
            return Reasoning(
                provider="openai", kind="reasoning", item_id=str(block.get("id", "")), summary=texts, data=data
            )
        case "reasoning" if block.get("reasoning"):
            return Reasoning(provider="openai-compat", kind="reasoning_content", text=str(block["reasoning"]))
    return None


def _config(thread_id: str, ns: str, checkpoint_id: str | None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


class LaminaCheckpointSaver(InMemorySaver):
    """A LangGraph checkpointer whose store is Lamina's session log (one session per thread, any thread id)."""

    def __init__(
        self, store: SessionStore, *, options: ThreadOptions | None = None, **keywords: Unpack[ThreadKeywords]
    ) -> None:
        """A checkpointer on `store`; each thread's Lamina session is set up by `options`.

        Args:
            store: The Lamina session store.
            options: How each thread's Lamina session is set up (default: `ThreadOptions()`).
            **keywords: Fields of `ThreadOptions`, overriding those of `options`.
        """
        super().__init__()
        self.store = store
        self.options = thread_options(options, **keywords)
        self._threads: dict[str, LaminaThread] = {}
        self._turns: dict[str, TurnContext] = {}
        self._replaying = False
        # LangGraph saves checkpoints from a background thread while the next node runs: one session
        # has one writer, so every use of a thread's log goes through this lock.
        self._lock = threading.RLock()

    def __enter__(self) -> LaminaCheckpointSaver:
        """The saver, closed (every thread's session) when the `with` block ends."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close every open thread's session."""
        self.close()

    async def __aenter__(self) -> LaminaCheckpointSaver:
        """The saver, closed (every thread's session) when the `async with` block ends."""
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Close every open thread's session."""
        self.close()

    # -- threads ---------------------------------------------------------------------------------

    def new_thread(self) -> str:
        """A new thread (a new Lamina session); its id is the session id."""
        with self._lock:
            return self._new_thread()

    def _new_thread(self) -> str:
        thread = LaminaThread.open(self.store, options=self.options, title="langgraph")
        self._threads[thread.id] = thread
        return thread.id

    def thread(self, thread_id: str) -> LaminaThread:
        """The Lamina session of `thread_id`, opened (and its checkpoints loaded) on first use, made if new.

        `thread_id` is any string: the caller's own names the session `THREAD_SESSION_PREFIX` and a
        digest of the id, in the store (so any saver on it finds the thread again); a thread id
        that `new_thread` made is its session's id.
        """
        with self._lock:
            return self._made(thread_id)

    def _made(self, thread_id: str) -> LaminaThread:
        found = self._thread(thread_id, make=True)
        assert found is not None  # made when missing
        return found

    def _thread(self, thread_id: str, *, make: bool) -> LaminaThread | None:
        """The thread's session (opened and replayed once); None when it has none and `make` is false."""
        found = self._threads.get(thread_id)
        if found is not None:
            return found
        opened = _open_thread(self.store, thread_id, self.options)
        if opened is None:
            if not make:  # a read makes no session (and remembers no miss: another host may make it)
                return None
            opened = _make_thread(self.store, thread_id, self.options)
        self._threads[thread_id] = opened
        self._replay(opened, thread_id)
        return opened

    def _replay(self, thread: LaminaThread, thread_id: str) -> None:
        self._replaying = True
        try:
            for entry in thread.session.path():
                if not isinstance(entry, Custom):
                    continue
                data = entry.data
                if entry.name == _CHECKPOINT:
                    config = _config(thread_id, data["ns"], data["parent"])
                    checkpoint = self.serde.loads_typed(_untyped(data["checkpoint"]))
                    metadata = self.serde.loads_typed(_untyped(data["metadata"]))
                    super().put(config, checkpoint, metadata, data["versions"])
                elif entry.name == _WRITES:
                    writes = [(c, self.serde.loads_typed(_untyped(v))) for c, v in data["writes"]]
                    config = _config(thread_id, data["ns"], data["checkpoint"])
                    super().put_writes(config, writes, data["task"], data["path"])
        finally:
            self._replaying = False

    def close(self) -> None:
        """Close every open thread's session (releases their writer locks)."""
        with self._lock:
            for thread in self._threads.values():
                thread.close()
            self._threads.clear()

    # -- the checkpointer ------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> Any:
        """The checkpoint `config` names (its thread's latest without a `checkpoint_id`), as `InMemorySaver` answers."""
        with self._lock:
            config = _text_thread_id(config)
            self._thread(config["configurable"]["thread_id"], make=False)
            return super().get_tuple(config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Any:
        """The checkpoints matching `config`, `filter`, `before` and `limit`, newest first (as `InMemorySaver`)."""
        with self._lock:
            if config is not None:
                config = _text_thread_id(config)
                self._thread(config["configurable"]["thread_id"], make=False)
            return iter(builtins.list(super().list(config, filter=filter, before=before, limit=limit)))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint: appended to the thread's log (fsynced when it ends a turn), then indexed."""
        with self._lock:
            return self._put(_text_thread_id(config), checkpoint, metadata, new_versions)

    def _put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        configurable = config["configurable"]
        thread = self._made(str(configurable["thread_id"]))
        record = {
            "ns": configurable.get("checkpoint_ns", ""),
            "parent": configurable.get("checkpoint_id"),
            "checkpoint": _typed(self.serde.dumps_typed(checkpoint)),
            "metadata": _typed(self.serde.dumps_typed(metadata)),
            "versions": dict(new_versions),
        }
        thread.record(Custom(name=_CHECKPOINT, data=record))
        if _turn_ends(checkpoint):  # group commit: one fsync per turn, as in Lamina's own loop
            thread.flush()
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes: appended to the thread's log (durable with the next checkpoint)."""
        with self._lock:
            self._put_writes(_text_thread_id(config), writes, task_id, task_path)

    def _put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str
    ) -> None:
        configurable = config["configurable"]
        thread = self._made(str(configurable["thread_id"]))
        record = {
            "ns": configurable.get("checkpoint_ns", ""),
            "checkpoint": configurable["checkpoint_id"],
            "writes": [[c, _typed(self.serde.dumps_typed(v))] for c, v in writes],
            "task": task_id,
            "path": task_path,
        }
        thread.record(Custom(name=_WRITES, data=record))
        super().put_writes(config, writes, task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        """Forget a thread's checkpoints: the session's leaf goes back to its first entry (the log keeps them)."""
        thread_id = str(thread_id)
        with self._lock:
            thread = self._thread(thread_id, make=False)
            if thread is not None:  # a thread with no session has nothing to forget
                thread.rewind(thread.root_id())
            self._turns.pop(thread_id, None)
            super().delete_thread(thread_id)

    # -- the async variants: the same methods, in a worker thread (the event loop never waits on a disk or a database)

    async def aget_tuple(self, config: RunnableConfig) -> Any:
        """`get_tuple`, run in a worker thread."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[Any]:
        """`list`, run in a worker thread."""
        found = await asyncio.to_thread(self.list, config, filter=filter, before=before, limit=limit)
        for item in found:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """`put`, run in a worker thread."""
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """`put_writes`, run in a worker thread."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """`delete_thread`, run in a worker thread."""
        await asyncio.to_thread(self.delete_thread, thread_id)

    # -- the model input -------------------------------------------------------------------------

    def model_input(self, config: RunnableConfig, messages: Sequence[BaseMessage]) -> builtins.list[BaseMessage]:
        """The messages to send the model now: logged, compacted when needed, placed by Lamina."""
        with self._lock:
            return self._model_input(_text_thread_id(config), messages)

    def _model_input(self, config: RunnableConfig, messages: Sequence[BaseMessage]) -> builtins.list[BaseMessage]:
        thread_id = str(config["configurable"]["thread_id"])
        thread = self._made(thread_id)
        logged = thread.twin_keys(_MESSAGE, _message_id)
        new = [m for m in messages if str(m.id) not in logged]
        if any(isinstance(m, HumanMessage) for m in new) and thread.over_threshold(
            "".join(_text(m.content) for m in new)
        ):
            _run(thread.compact(trigger="threshold"))
        for message in new:
            self._log(thread_id, thread, message)
        return self._placed(thread_id, thread, messages)

    def _log(self, thread_id: str, thread: LaminaThread, message: BaseMessage) -> None:
        first: str | None = None
        pending = self._turns.get(thread_id)
        if isinstance(message, HumanMessage):
            turn = thread.begin_turn(_text(message.content))
            self._turns[thread_id] = turn
            first = turn.user_entry_id
        elif isinstance(message, AIMessage):
            if pending is not None:
                thread.commit(pending)
            text, reasoning = _text(message.content), _reasoning_of(message)
            if text or reasoning:
                first = thread.record(AssistantMessage(text=text, reasoning=reasoning)).id
            for call in message.tool_calls:
                entry = thread.record(ToolCall(call_id=str(call["id"]), name=call["name"], input=dict(call["args"])))
                first = first or entry.id
        elif isinstance(message, ToolMessage):
            result = ToolResult(call_id=message.tool_call_id, name=message.name or "", content=_text(message.content))
            first = thread.record(result).id
        thread.record_twin(_MESSAGE, {"id": str(message.id), "first": first})

    def _placed(
        self, thread_id: str, thread: LaminaThread, messages: Sequence[BaseMessage]
    ) -> builtins.list[BaseMessage]:
        turn = self._turns.get(thread_id) or thread.preview()
        out: builtins.list[BaseMessage] = []
        system = thread.system_text(turn)
        if system:
            out.append(SystemMessage(content=system))
        head = [t for t in (thread.context_text(turn), *thread.prelude_texts(turn)) if t]
        if head:
            out.append(HumanMessage(content=[{"type": "text", "text": t} for t in head]))
        view = thread.session.view().entries
        tails = {k: str(v) for k, v in turn_tails(view).items()}
        current = self._turns.get(thread_id)
        if current is not None:
            tails[current.user_entry_id] = thread.tail_text(current)
        by_id = {str(m.id): m for m in messages}
        for twin in thread.twins(_MESSAGE):
            message = by_id.get(str(twin.data["id"]))
            if message is None:
                continue
            tail = tails.get(twin.data.get("first") or "")
            if isinstance(message, HumanMessage) and tail:
                parts = (
                    [{"type": "text", "text": message.content}]
                    if isinstance(message.content, str)
                    else list(message.content)
                )
                message = message.model_copy(update={"content": [*parts, {"type": "text", "text": tail}]})
            elif isinstance(message, ToolMessage):
                message = message.model_copy(update={"content": str(neutralise(_text(message.content)))})
            out.append(message)
        return out


def _text_thread_id(config: RunnableConfig) -> RunnableConfig:
    """`config` with its thread id as text: `thread_id=42` and `"42"` are one thread, here and after a reopen."""
    configurable = config.get("configurable", {})
    if isinstance(configurable.get("thread_id"), str):
        return config
    return {**config, "configurable": {**configurable, "thread_id": str(configurable["thread_id"])}}


def _session_id_of(thread_id: str) -> str:
    """The session of a caller's own thread id: the same on every host, whatever the id's characters."""
    digest = hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{THREAD_SESSION_PREFIX}{digest[:32]}"


def _open_thread(store: SessionStore, thread_id: str, options: ThreadOptions) -> LaminaThread | None:
    """The thread's session if the store has one: the caller's thread's own, else the session `thread_id` names."""
    candidates = [_session_id_of(thread_id)]
    with contextlib.suppress(UsageError):  # not a session id: only the caller's thread's own session can be it
        candidates.append(check_session_id(thread_id))  # a thread `new_thread` made
    for session_id in candidates:
        try:
            return LaminaThread.open(store, session_id, options=options)
        except SessionNotFoundError:
            continue
    return None


def _make_thread(store: SessionStore, thread_id: str, options: ThreadOptions) -> LaminaThread:
    """Make the session of a caller's new thread (another saver may make it at the same time), then open it."""
    session_id = _session_id_of(thread_id)
    cwd = str(options.workspace) if options.workspace is not None else ""
    with contextlib.suppress(SessionExistsError):  # made meanwhile, here or on another host: open it
        store.create(session_id=session_id, cwd=cwd, title=f"langgraph {thread_id}").close()
    return LaminaThread.open(store, session_id, options=options)


def _turn_ends(checkpoint: Checkpoint) -> bool:
    """Whether the graph's messages end with the model's answer (an AI message calling no tool)."""
    messages = checkpoint["channel_values"].get("messages")
    if not isinstance(messages, builtins.list) or not messages:
        return False
    last = messages[-1]
    return isinstance(last, AIMessage) and not last.tool_calls


def _message_id(data: Any) -> str:
    return str(data["id"])


def _run(coroutine: Any) -> Any:
    """Run a coroutine to completion from synchronous code (a graph node may run in a worker thread)."""
    import concurrent.futures

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:  # inside a loop: run it beside it
        return pool.submit(asyncio.run, coroutine).result()


__all__ = [
    "THREAD_SESSION_PREFIX",
    "CompactionPolicy",
    "LaminaCheckpointSaver",
    "ThreadOptions",
]

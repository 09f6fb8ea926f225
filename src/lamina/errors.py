"""The Lamina error tree.

```
LaminaError
├── UsageError                      the caller's mistake (bad argument, unknown name)
│   ├── UnknownPresetError
│   ├── PresetFileError             a custom preset file that cannot be used (prompt.presets)
│   ├── PreferencesError            a preferences file that cannot be used (workspace.preferences)
│   ├── ProjectFileError            a project manifest that cannot be used (workspace.project)
│   ├── AttachmentError             a file that cannot be attached (type, corrupt, too large)
│   ├── ConfigError                 a config file that cannot be used (file, key)
│   ├── ToolInputError              a tool call's input that does not fit its schema (tools.base)
│   ├── PlanTransitionError         a plan decision its state does not allow (plan)
│   ├── ScriptError                 a scripted provider's script that cannot be used (providers.scripted)
│   ├── NotFoundError               no session, entry, request or file by that name (serve.reader)
│   └── CacheSimulationError        a request the cache simulator cannot bill (placement)
│       └── CacheBreakpointError    more breakpoints than the provider allows
└── LaminaRuntimeError              something outside the caller's control went wrong
    ├── SessionError
    │   ├── SessionNotFoundError    no such session in the store
    │   ├── SessionLockedError      another writer holds the session
    │   │   └── SessionLeaseLostError   another server took the session over: this writer is fenced off
    │   ├── SessionCorruptError     a log or metadata file that cannot be used (file, line, byte)
    │   ├── SessionIOError          the disk refused a read or write (file, byte)
    │   ├── StoreError              the database behind a store failed
    │   │   ├── StoreConnectionError    refused or dropped connection (a turn is all or nothing)
    │   │   ├── StoreSchemaError    a schema newer than this Lamina, or not migrated (both versions)
    │   │   └── StoreReadOnlyError  a read-only database (a replica) asked to write
    │   ├── EntryDecodeError        one log line that is not a valid entry (also a ValueError)
    │   ├── MissingEntryError       a path walked to a parent that is not there (also a KeyError)
    │   └── BundleError             a session bundle refused on import (bundle, member)
    ├── SourceError                 an MCP or API source failed
    │   ├── SourceConnectionError   the source could not be started or reached
    │   └── ToolDefinitionError     a tool definition Lamina refuses to put in a request
    ├── TooManyModelCallsError      the model kept calling tools past `max_model_calls` in a turn
    ├── RequestDamageError          a logged request the inspector cannot rebuild (serve.requests)
    └── ProviderError               a model provider refused or failed a request
        ├── ContextOverflowError    the prompt is longer than the model's context window
        ├── RateLimitError          429; `retry_after` when the provider said
        │   └── OverloadedError     529 / 503 overloaded; `retry_after` when the provider said
        ├── AuthenticationError     401 / 403: missing or wrong API key
        ├── InvalidRequestError     400 / 404 / 422 that is not an overflow
        ├── TransientServerError    500 / 502 / 504, connection reset, timeout
        ├── ProviderSessionLostError the provider-side session to resume is gone: recover in a fresh one
        └── ScriptExhaustedError    a scripted provider asked for more replies than its script has
```

Classes outside this module are named with their module. `tests/test_error_tree.py` imports
every module and checks that each public exception class is drawn here under its real parent.
Every error carries typed fields and a message that names the file, field or holder involved.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "AttachmentError",
    "AuthenticationError",
    "BundleError",
    "ConfigError",
    "ContextOverflowError",
    "EntryDecodeError",
    "InvalidRequestError",
    "LaminaError",
    "LaminaRuntimeError",
    "MissingEntryError",
    "OverloadedError",
    "ProviderError",
    "ProviderSessionLostError",
    "RateLimitError",
    "SessionCorruptError",
    "SessionError",
    "SessionIOError",
    "SessionLeaseLostError",
    "SessionLockedError",
    "SessionNotFoundError",
    "SourceConnectionError",
    "SourceError",
    "StoreConnectionError",
    "StoreError",
    "StoreReadOnlyError",
    "StoreSchemaError",
    "TooManyModelCallsError",
    "ToolDefinitionError",
    "TransientServerError",
    "UnknownPresetError",
    "UsageError",
]


class LaminaError(Exception):
    """Base class of every error Lamina raises on purpose."""


class UsageError(LaminaError):
    """The caller asked for something that cannot be done as asked."""


class UnknownPresetError(UsageError):
    """A system prompt preset name that Lamina does not know."""

    def __init__(self, name: str, known: tuple[str, ...]) -> None:
        self.name = name
        self.known = known
        super().__init__(f"unknown system prompt preset {name!r}; known presets: {', '.join(known)}")


class AttachmentError(UsageError):
    """A file given as an attachment cannot be used (unknown type, corrupt, encrypted, too large)."""

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason
        super().__init__(f"attachment {name!r}: {reason}")


class ConfigError(UsageError):
    """A config file that cannot be read; the message names the file and the key."""


class LaminaRuntimeError(LaminaError):
    """A failure outside the caller's control (disk, provider, another process)."""


class TooManyModelCallsError(LaminaRuntimeError):
    """The model kept calling tools past `max_model_calls` in one turn."""


class SourceError(LaminaRuntimeError):
    """An MCP or API source failed; the message names the source."""


class SourceConnectionError(SourceError):
    """A source could not be started or reached; the message names the source and the cause."""

    def __init__(self, slug: str, reason: str) -> None:
        self.slug = slug
        self.reason = reason
        super().__init__(f"source {slug}: {reason}")


class ToolDefinitionError(SourceError):
    """A source offered a tool definition Lamina refuses to put in a request; the message names both."""

    def __init__(self, source: str, tool: str, reason: str) -> None:
        self.source = source
        self.tool = tool
        self.reason = reason
        super().__init__(f"source {source}: tool {tool!r} refused: {reason}")


class SessionError(LaminaRuntimeError):
    """A session could not be created, opened, read or written."""


class SessionNotFoundError(SessionError):
    """No session with this id exists in the store."""

    def __init__(self, session_id: str, root: Path | str) -> None:
        self.session_id = session_id
        self.root = root
        super().__init__(f"no session {session_id!r} in store {root}")


class SessionLockedError(SessionError):
    """Another writer (this process or another) holds the session's write lock."""

    def __init__(self, path: Path | str, holder: str) -> None:
        self.path = path
        self.holder = holder
        super().__init__(f"session {path} is already open for writing by {holder}")


class SessionLeaseLostError(SessionLockedError):
    """This writer's lease was taken over (it stalled past the lease's expiry): its appends are refused.

    Nothing it appended since its last successful flush was committed, unless a flush that raised
    `StoreConnectionError` had its COMMIT's answer lost; reopen the session to go on from what is
    there (and to see whether that turn landed)."""

    def __init__(self, session: str, holder: str) -> None:
        SessionError.__init__(self, f"session {session} was taken over by {holder}: this writer's lease is lost")
        self.path = session
        self.holder = holder


class StoreError(SessionError):
    """The database behind a session store failed or refused."""

    def __init__(self, location: str, message: str) -> None:
        self.location = location
        super().__init__(f"{location}: {message}")


class StoreConnectionError(StoreError):
    """The database could not be reached, the connection dropped, or it did not answer in time. A flush
    is one transaction: the turn's entries were all committed or none (all, possibly, when only the
    COMMIT's answer was lost), and the next flush settles them without writing any twice."""


class StoreSchemaError(StoreError):
    """The database's schema is not the one this Lamina knows: newer (upgrade Lamina) or older (migrate)."""

    def __init__(self, location: str, found: int, supported: int, advice: str) -> None:
        self.found = found
        self.supported = supported
        super().__init__(location, f"schema version {found}, this Lamina knows version {supported}: {advice}")


class StoreReadOnlyError(StoreError):
    """The database takes no writes (a hot-standby replica, or read-only by setting)."""


class SessionCorruptError(SessionError):
    """A session file cannot be used as it is; `line` is 1-based and `offset` a byte offset, when known."""

    def __init__(self, path: Path, reason: str, *, line: int | None = None, offset: int | None = None) -> None:
        self.path = path
        self.reason = reason
        self.line = line
        self.offset = offset
        where = f"{path}:{line}" if line is not None else str(path)
        if offset is not None:
            where += f" (byte {offset})"
        super().__init__(f"{where}: {reason}")


class SessionIOError(SessionError):
    """The operating system refused to read or write a session file (disk full, permissions, a folder
    where a file should be). After a failed log write the session takes no more appends: reopen it."""

    def __init__(self, path: Path, action: str, error: OSError, *, offset: int | None = None) -> None:
        self.path = path
        self.action = action
        self.error = error
        self.offset = offset
        at = f" at byte {offset}" if offset is not None else ""
        reason = error.strerror or type(error).__name__
        super().__init__(f"{path}: cannot {action}{at}: {reason}")


class EntryDecodeError(SessionError, ValueError):
    """A log line that is not a valid entry."""


class MissingEntryError(SessionError, KeyError):
    """A path walked to a `parent_id` that is not among the given entries."""

    def __init__(self, entry_id: str) -> None:
        self.entry_id = entry_id
        super().__init__(entry_id)

    def __str__(self) -> str:  # KeyError would print the id quoted, as a repr
        return f"no entry {self.entry_id!r} on this path"


class BundleError(SessionError):
    """A session bundle that cannot be imported as it is (nothing was written); `member` names the file inside."""

    def __init__(self, path: Path, reason: str, *, member: str | None = None) -> None:
        self.path = path
        self.reason = reason
        self.member = member
        where = f"{path} ({member!r})" if member is not None else str(path)
        super().__init__(f"bundle {where}: {reason}")


class ProviderError(LaminaRuntimeError):
    """A model provider refused or failed a request."""

    retryable = False

    def __init__(self, provider: str, message: str, *, status: int | None = None, body: str = "") -> None:
        self.provider = provider
        self.status = status
        self.body = body
        where = f"{provider} (HTTP {status})" if status is not None else provider
        super().__init__(f"{where}: {message}")


class ContextOverflowError(ProviderError):
    """The prompt does not fit the model's context window: compact, then retry once."""


class RateLimitError(ProviderError):
    """Too many requests (HTTP 429)."""

    retryable = True

    def __init__(
        self, provider: str, message: str, *, status: int | None = 429, body: str = "", retry_after: float | None = None
    ) -> None:
        super().__init__(provider, message, status=status, body=body)
        self.retry_after = retry_after


class OverloadedError(RateLimitError):
    """The provider is overloaded (Anthropic's 529, or 503)."""


class AuthenticationError(ProviderError):
    """The API key is missing or not accepted."""


class InvalidRequestError(ProviderError):
    """The provider rejected the request as malformed (not an overflow)."""


class TransientServerError(ProviderError):
    """A server error or a broken connection that may succeed on retry."""

    retryable = True


class ProviderSessionLostError(ProviderError):
    """The provider cannot resume the provider-side session it was asked to (gone, another machine, expired).

    Not retried as such: the agent clears the stored session, queues a recovery block and sends
    the turn once more in a fresh provider session.
    """

    def __init__(self, provider: str, session_id: str, message: str) -> None:
        self.session_id = session_id
        super().__init__(provider, message)

"""The Lamina error tree (pure): every error Lamina raises on purpose, with typed fields.

The tree, with what each class means, is drawn in `docs/errors.md`; `tests/test_error_tree.py`
checks that every public exception class is drawn there under its real parent.
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
    "MissingExtraError",
    "OverloadedError",
    "ProviderError",
    "ProviderSessionLostError",
    "RateLimitError",
    "SessionCorruptError",
    "SessionError",
    "SessionExistsError",
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
        """Name the unknown preset.

        Args:
            name: The preset asked for.
            known: The preset names Lamina knows.
        """
        self.name = name
        self.known = known
        super().__init__(f"unknown system prompt preset {name!r}; known presets: {', '.join(known)}")


class AttachmentError(UsageError):
    """A file given as an attachment cannot be used (unknown type, corrupt, encrypted, too large)."""

    def __init__(self, name: str, reason: str) -> None:
        """Name the file and why it cannot be attached.

        Args:
            name: The file's name.
            reason: Why it cannot be used.
        """
        self.name = name
        self.reason = reason
        super().__init__(f"attachment {name!r}: {reason}")


class MissingExtraError(UsageError):
    """A feature whose optional dependencies are not installed; the message names the extra to install."""

    def __init__(self, feature: str, extra: str, module: str = "") -> None:
        """Name the feature, the extra that brings its dependencies and the module found missing.

        Args:
            feature: What was asked for (`the Anthropic provider`, `a PDF attachment`).
            extra: The extra of the `lamina` distribution that installs it (`anthropic`, `documents`).
            module: The top-level module that could not be imported, if known.
        """
        self.feature = feature
        self.extra = extra
        self.module = module
        missing = f" (no module named {module!r})" if module else ""
        super().__init__(f"{feature} needs the {extra!r} extra: pip install 'lamina[{extra}]'{missing}")

    @classmethod
    def of(cls, exc: ImportError, feature: str, extra: str) -> MissingExtraError:
        """The error for an optional import that failed (raise it `from None`).

        Args:
            exc: The `ImportError` of the optional module.
            feature: What needed it.
            extra: The extra that installs it.

        Returns:
            The error, naming the missing module.
        """
        return cls(feature, extra, (exc.name or "").partition(".")[0])


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
        """Name the source and the cause.

        Args:
            slug: The source's slug.
            reason: Why it could not be started or reached.
        """
        self.slug = slug
        self.reason = reason
        super().__init__(f"source {slug}: {reason}")


class ToolDefinitionError(SourceError):
    """A source offered a tool definition Lamina refuses to put in a request; the message names both."""

    def __init__(self, source: str, tool: str, reason: str) -> None:
        """Name the source, the tool and why it is refused.

        Args:
            source: The source's slug.
            tool: The tool's name as the source gave it.
            reason: Why Lamina refuses it.
        """
        self.source = source
        self.tool = tool
        self.reason = reason
        super().__init__(f"source {source}: tool {tool!r} refused: {reason}")


class SessionError(LaminaRuntimeError):
    """A session could not be created, opened, read or written."""


class SessionNotFoundError(SessionError):
    """No session with this id exists in the store."""

    def __init__(self, session_id: str, root: Path | str) -> None:
        """Name the session and the store.

        Args:
            session_id: The id looked for.
            root: The store it was looked for in.
        """
        self.session_id = session_id
        self.root = root
        super().__init__(f"no session {session_id!r} in store {root}")


class SessionExistsError(SessionError):
    """A session was to be created with an id another session of the store already has."""

    def __init__(self, session_id: str, root: Path | str) -> None:
        """Name the session and the store.

        Args:
            session_id: The id asked for.
            root: The store that already has it.
        """
        self.session_id = session_id
        self.root = root
        super().__init__(f"session {session_id!r} already exists in store {root}")


class SessionLockedError(SessionError):
    """Another writer (this process or another) holds the session's write lock."""

    def __init__(self, path: Path | str, holder: str) -> None:
        """Name the session and the writer holding it.

        Args:
            path: The session's file or location.
            holder: Who holds the write lock.
        """
        self.path = path
        self.holder = holder
        super().__init__(f"session {path} is already open for writing by {holder}")


class SessionLeaseLostError(SessionLockedError):
    """This writer's lease was taken over (it stalled past the lease's expiry): its appends are refused.

    Nothing it appended since its last successful flush was committed, unless a flush that raised
    `StoreConnectionError` had its COMMIT's answer lost; reopen the session to go on from what is
    there (and to see whether that turn landed).
    """

    def __init__(self, session: str, holder: str) -> None:
        """Name the session and the writer that took it over.

        Args:
            session: The session's location.
            holder: The writer that now holds the lease.
        """
        SessionError.__init__(self, f"session {session} was taken over by {holder}: this writer's lease is lost")
        self.path = session
        self.holder = holder


class StoreError(SessionError):
    """The database behind a session store failed or refused."""

    def __init__(self, location: str, message: str) -> None:
        """Name the database and what went wrong.

        Args:
            location: The database, as shown to the user.
            message: What failed or was refused.
        """
        self.location = location
        super().__init__(f"{location}: {message}")


class StoreConnectionError(StoreError):
    """The database could not be reached, the connection dropped, or it did not answer in time.

    A flush is one transaction: the turn's entries were all committed or none (all, possibly, when
    only the COMMIT's answer was lost), and the next flush settles them without writing any twice.
    """


class StoreSchemaError(StoreError):
    """The database's schema is not the one this Lamina knows: newer (upgrade Lamina) or older (migrate)."""

    def __init__(self, location: str, found: int, supported: int, advice: str) -> None:
        """Name the database and both schema versions.

        Args:
            location: The database, as shown to the user.
            found: The schema version the database has.
            supported: The schema version this Lamina knows.
            advice: What to do (upgrade Lamina, or migrate).
        """
        self.found = found
        self.supported = supported
        super().__init__(location, f"schema version {found}, this Lamina knows version {supported}: {advice}")


class StoreReadOnlyError(StoreError):
    """The database takes no writes (a hot-standby replica, or read-only by setting)."""


class SessionCorruptError(SessionError):
    """A session file cannot be used as it is."""

    def __init__(self, path: Path, reason: str, *, line: int | None = None, offset: int | None = None) -> None:
        """Name the file, where in it, and why.

        Args:
            path: The session file.
            reason: Why it cannot be used.
            line: The 1-based line, when known.
            offset: The byte offset, when known.
        """
        self.path = path
        self.reason = reason
        self.line = line
        self.offset = offset
        where = f"{path}:{line}" if line is not None else str(path)
        if offset is not None:
            where += f" (byte {offset})"
        super().__init__(f"{where}: {reason}")


class SessionIOError(SessionError):
    """The operating system refused to read or write a session file.

    Disk full, permissions, a folder where a file should be. After a failed log write the session
    takes no more appends: reopen it.
    """

    def __init__(self, path: Path, action: str, error: OSError, *, offset: int | None = None) -> None:
        """Name the file, the action and the operating system's reason.

        Args:
            path: The session file.
            action: What was being done, as a verb phrase ("read the log").
            error: The operating system's error.
            offset: The byte offset, when known.
        """
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
        """Name the missing entry.

        Args:
            entry_id: The `parent_id` walked to.
        """
        self.entry_id = entry_id
        super().__init__(entry_id)

    def __str__(self) -> str:  # KeyError would print the id quoted, as a repr
        """The message, with the id as written."""
        return f"no entry {self.entry_id!r} on this path"


class BundleError(SessionError):
    """A session bundle that cannot be imported as it is (nothing was written)."""

    def __init__(self, path: Path, reason: str, *, member: str | None = None) -> None:
        """Name the bundle, the file inside it, and why.

        Args:
            path: The bundle.
            reason: Why it is refused.
            member: The file inside the bundle, when one is to blame.
        """
        self.path = path
        self.reason = reason
        self.member = member
        where = f"{path} ({member!r})" if member is not None else str(path)
        super().__init__(f"bundle {where}: {reason}")


class ProviderError(LaminaRuntimeError):
    """A model provider refused or failed a request."""

    retryable = False
    max_attempts: int | None = None
    """At most this many attempts in all, whatever the retry policy allows (None: the policy decides)."""

    def __init__(self, provider: str, message: str, *, status: int | None = None, body: str = "") -> None:
        """Name the provider and what it answered.

        Args:
            provider: The provider's name.
            message: What failed.
            status: The HTTP status, when there was one.
            body: The response body, as received.
        """
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
        """Name the provider, its answer and how long it asked to wait.

        Args:
            provider: The provider's name.
            message: What failed.
            status: The HTTP status (429 unless given).
            body: The response body, as received.
            retry_after: Seconds to wait, when the provider said.
        """
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
        """Name the provider and the session it cannot resume.

        Args:
            provider: The provider's name.
            session_id: The provider-side session asked for.
            message: Why it cannot be resumed.
        """
        self.session_id = session_id
        super().__init__(provider, message)

"""A turn that ended with an error, recorded in the log so a reader of it can tell (I/O through the engine).

The agent appends one `Custom` entry named `lamina.session.TURN_FAILED` with the error in words;
no request carries it. The inspector shows the session as failed, with that error.
"""

from __future__ import annotations

import logging
from typing import Final

from lamina.engine import ContextEngine
from lamina.errors import LaminaError
from lamina.session import TURN_FAILED, Custom

ERROR_CHARS: Final = 2_000
"""Characters of the error's words the entry keeps."""

_log = logging.getLogger(__name__)


def record_failure(engine: ContextEngine, error: Exception) -> None:
    """Append the failure of the turn under way; a log that cannot take it is left alone (the error goes on)."""
    words = (str(error) or type(error).__name__)[:ERROR_CHARS]
    try:
        engine.record(Custom(name=TURN_FAILED, data={"error": words, "kind": type(error).__name__}))
    except (LaminaError, OSError) as exc:  # the store itself may be what failed
        _log.warning("the turn's failure could not be logged: %s", exc)

"""Control characters made visible: the one escaping of what would act on a terminal or hide in a page (pure).

The CLI prints through it (`lamina.cli`'s console wrapper) and the inspector shows texts through it,
so a right-to-left override or an escape sequence reads the same in both.
"""

from __future__ import annotations

import re
from typing import Final

_UNSAFE: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 controls but tab and newline, DEL, C1 controls (CSI, OSC, …) and bidirectional overrides."""


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: ␛ for ESC, ␇ for BEL, …
    if code == 0x7F:
        return "␡"
    return f"<U+{code:04X}>"


def show_controls(text: str) -> str:
    """`text` with every control character, escape sequence introducer and bidi override made visible.

    Tabs and newlines stay (a CRLF becomes a newline); the rest become visible symbols, so an
    escape sequence is printed as text (`␛[2J`) instead of acting on the terminal.
    """
    return _UNSAFE.sub(_visible, text.replace("\r\n", "\n"))

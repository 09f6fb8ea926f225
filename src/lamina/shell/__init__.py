"""The shell reader: one reading of a Bash command line, from tree-sitter-bash's grammar (pure).

What programs a command runs (for allow and deny rules), which files it reads and which it writes
(for required reads, the compaction ledger and protected paths) all come from `read_command`.
See docs/security.md, "The shell reader and protected paths".
"""

from __future__ import annotations

from lamina.shell._file_uses import FileAccess, FileUses, file_uses
from lamina.shell._parse import read_command
from lamina.shell._programs import could_match, could_run
from lamina.shell._syntax import CommandReading, Redirect, SimpleCommand, Word

__all__ = [
    "CommandReading",
    "FileAccess",
    "FileUses",
    "Redirect",
    "SimpleCommand",
    "Word",
    "could_match",
    "could_run",
    "file_uses",
    "read_command",
]

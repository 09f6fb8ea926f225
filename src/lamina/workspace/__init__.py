"""Workspace files an agent works with: project context files, skills, memory, attachments (I/O)."""

from lamina.workspace.context_files import (
    CONTEXT_FILE_NAMES,
    SKIPPED_DIR_NAMES,
    TRUNCATION_MARK,
    ContextFile,
    ContextFileFinder,
    ContextFileScan,
    SkippedPath,
    find_context_files,
    nearest_context_files,
)

__all__ = [
    "CONTEXT_FILE_NAMES",
    "SKIPPED_DIR_NAMES",
    "TRUNCATION_MARK",
    "ContextFile",
    "ContextFileFinder",
    "ContextFileScan",
    "SkippedPath",
    "find_context_files",
    "nearest_context_files",
]

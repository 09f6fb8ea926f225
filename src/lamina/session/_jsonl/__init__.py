"""The JSONL store, the embedded default: one folder per session, its log one JSON line per entry (I/O).

`LocalSessionStore` keeps the sessions under one folder; `JsonlSession` is an open one (`_jsonl_open`
loads and checks the log, `_jsonl_write` appends); every write goes through `_file_layer`, the
metadata file is `_session_meta`, the writer's lock `_writer_lock`; `_jsonl_check` is `sessions check`
and `repair`. Private: `lamina.session` exports these names.
"""

from lamina.session._jsonl._file_layer import FileLayer, OsFiles
from lamina.session._jsonl._jsonl_check import SessionHealth, check_session, check_store, repair_session
from lamina.session._jsonl._jsonl_store import LocalSessionStore
from lamina.session._jsonl._jsonl_write import JsonlSession

__all__ = [
    "FileLayer",
    "JsonlSession",
    "LocalSessionStore",
    "OsFiles",
    "SessionHealth",
    "check_session",
    "check_store",
    "repair_session",
]

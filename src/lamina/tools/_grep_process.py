"""Grep's worker process: started for one call, fed one file at a time, killed at the deadline or on cancel (I/O).

The search itself is `_grep_worker.search_text`, in `python -I -S _grep_worker.py`: a pattern that
backtracks for hours on one line is stopped by killing the process, which a thread could not be.
Where no worker can start (no interpreter to run), the search runs in the calling thread, and the
time limit and a cancellation are then checked between files only. See docs/tools.md, "Grep".
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Final, Literal

from lamina.tools._grep_worker import FRAME, Mode, compile_pattern, search_text

WORKER_SCRIPT: Final = Path(__file__).with_name("_grep_worker.py")
Stop = Literal["deadline", "cancelled", "failed"]


class SearchWorker:
    """One Grep call's search: `search` a file at a time; `kill` from any thread stops it at once."""

    def __init__(self, *, pattern: str, ignore_case: bool, mode: Mode, max_line_chars: int, deadline: float) -> None:
        """Prepare the search; the process starts with the first file.

        Args:
            pattern: The regular expression (already validated).
            ignore_case: Match letters in any case.
            mode: Grep's output mode.
            max_line_chars: A longer matching line is cut.
            deadline: `time.monotonic()` at which the worker is killed.
        """
        self._header = {"pattern": pattern, "ignore_case": ignore_case, "mode": mode, "max_line_chars": max_line_chars}
        self._mode: Mode = mode
        self._max_line_chars = max_line_chars
        self.deadline = deadline
        """`time.monotonic()` at which the search stops."""
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._timer: threading.Timer | None = None
        self._in_thread = False
        self.stopped: Stop | None = None
        """Why the search stopped before its end, or None while it runs (or ended by itself)."""

    @property
    def pid(self) -> int | None:
        """The worker process's id, once it runs (None before, and when searching in the calling thread)."""
        return None if self._process is None else self._process.pid

    def search(self, shown: str, data: bytes, limit: int) -> tuple[list[str], bool] | None:
        """The file's rows and whether rows were left out (`search_text`), or None when the search was stopped."""
        if self.stopped is not None or time.monotonic() > self.deadline:
            self.kill("deadline" if self.stopped is None else self.stopped)
            return None
        process = self._started()
        if self.stopped is not None:
            return None
        if process is None:
            regex = compile_pattern(str(self._header["pattern"]), ignore_case=bool(self._header["ignore_case"]))
            text = data.decode("utf-8", errors="replace")
            return search_text(regex, text, shown, self._mode, limit, self._max_line_chars)
        assert process.stdin is not None and process.stdout is not None
        name = shown.encode("utf-8", errors="surrogatepass")
        try:
            process.stdin.write(FRAME.pack(len(name), len(data), limit))
            process.stdin.write(name)
            process.stdin.write(data)
            process.stdin.flush()
            line = process.stdout.readline()
        except (OSError, ValueError):  # killed meanwhile: a broken pipe, or a closed file
            line = b""
        if not line:
            self.kill("failed")  # no answer and no stop asked for: the worker died by itself
            return None
        rows, more = json.loads(line)
        return [str(row) for row in rows], bool(more)

    def kill(self, reason: Stop = "cancelled") -> None:
        """Stop the search now (from any thread): the worker process is killed, no file is searched after."""
        with self._lock:
            if self.stopped is None:
                self.stopped = reason
            process = self._process
        if process is not None:
            with contextlib.suppress(OSError):
                process.kill()

    def close(self) -> None:
        """End the worker (its input closed, or killed if stopped) and wait for it; no process is left behind."""
        with self._lock:
            timer, process = self._timer, self._process
        if timer is not None:
            timer.cancel()
        if process is None:
            return
        assert process.stdin is not None and process.stdout is not None
        with contextlib.suppress(OSError):
            process.stdin.close()
        if self.stopped is not None:
            with contextlib.suppress(OSError):
                process.kill()
        process.wait()
        process.stdout.close()

    def _started(self) -> subprocess.Popen[bytes] | None:
        """The worker process, started on the first call; None when searching in this thread instead."""
        with self._lock:
            if self._process is not None or self._in_thread or self.stopped is not None:
                return self._process  # stopped before it started: `kill` saw no process, so none starts
            try:
                process = subprocess.Popen(
                    [sys.executable, "-I", "-S", str(WORKER_SCRIPT)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                )
            except (OSError, ValueError):  # no interpreter to start (an embedded or frozen host)
                self._in_thread = True
                return None
            self._process = process
            timer = threading.Timer(max(0.0, self.deadline - time.monotonic()), self.kill, args=("deadline",))
            timer.daemon = True
            timer.start()
            self._timer = timer
        assert process.stdin is not None
        with contextlib.suppress(OSError):
            process.stdin.write(json.dumps(self._header).encode() + b"\n")
        return process

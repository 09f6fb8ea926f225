"""The one atomic write (`lamina._atomic`): a writer killed at any step leaves the old file or the new one, whole.

Every place that replaces a file goes through it (session metadata, bundles, the JSONL log's
repair, session files, attachments, the Write tool, the CLI's and the trust file's settings).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lamina._atomic import DiskSteps, atomic_write

OLD = b"old content\n" * 100
NEW = b"new content\n" * 150
STEPS = ("open", "write", "fsync", "close", "replace", "fsync_dir")

# The child writes NEW over the file through steps that kill the process (SIGKILL, no cleanup) when
# the named step is reached, before or after it runs.
_CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from lamina._atomic import DiskSteps, atomic_write

    step, when, target = sys.argv[1], sys.argv[2], Path(sys.argv[3])

    class Dying(DiskSteps):
        pass

    def dying(name):
        real = getattr(DiskSteps, name)
        def run(self, *args, **kwargs):
            if when == "before":
                os.kill(os.getpid(), signal.SIGKILL)
            result = real(self, *args, **kwargs)
            os.kill(os.getpid(), signal.SIGKILL)
            return result
        return run

    setattr(Dying, step, dying(step))
    atomic_write(target, b"new content\\n" * 150, steps=Dying())
    """
)


def _run_child(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, timeout=60, check=False)


@pytest.mark.slow
@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("step", STEPS)
def test_a_writer_killed_at_any_step_leaves_the_old_file_or_the_new_one(tmp_path: Path, step: str, when: str) -> None:
    target = tmp_path / "settings.toml"
    target.write_bytes(OLD)
    done = _run_child(step, when, str(target))
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    assert target.read_bytes() in (OLD, NEW)
    if step == "fsync_dir" or (step, when) == ("replace", "after"):
        assert target.read_bytes() == NEW
    # the next writer is never in the way of a leftover temporary file
    atomic_write(target, b"third\n")
    assert target.read_bytes() == b"third\n"
    left = [p.name for p in tmp_path.iterdir() if p.name != "settings.toml"]
    assert all(name.startswith(".settings.toml.") and name.endswith(".tmp") for name in left), left


_RACER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from lamina._atomic import atomic_write

    target, tag, rounds = Path(sys.argv[1]), sys.argv[2].encode(), int(sys.argv[3])
    for n in range(rounds):
        atomic_write(target, tag * (1000 + n))
    """
)


@pytest.mark.slow
def test_two_writers_racing_never_share_a_temporary_file_or_leave_a_mixed_one(tmp_path: Path) -> None:
    target = tmp_path / "config.toml"
    target.write_bytes(b"a" * 1000)
    racers = [
        subprocess.Popen([sys.executable, "-c", _RACER, str(target), tag, "200"], stderr=subprocess.PIPE)
        for tag in ("a", "b")
    ]
    seen = 0
    while any(racer.poll() is None for racer in racers):
        data = target.read_bytes()
        assert data and len(set(data)) == 1, data[:40]  # one writer's whole content, never a mix
        seen += 1
    for racer in racers:
        _, err = racer.communicate(timeout=60)
        assert racer.returncode == 0, err.decode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml"]
    assert seen >= 1


def test_a_failing_step_leaves_the_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "meta.json"
    target.write_bytes(OLD)

    class Full(DiskSteps):  # the real disk, full at the write
        def write(self, fd: int, data: bytes) -> None:
            raise OSError(28, os.strerror(28))

    with pytest.raises(OSError, match="No space left"):
        atomic_write(target, NEW, steps=Full())
    assert target.read_bytes() == OLD
    assert [p.name for p in tmp_path.iterdir()] == ["meta.json"]


def test_a_writer_function_gets_the_descriptor_and_the_mode_applies(tmp_path: Path) -> None:
    target = tmp_path / "bundle.zip"
    atomic_write(target, lambda fd: os.write(fd, b"zip"), mode=0o600)
    assert target.read_bytes() == b"zip"
    assert target.stat().st_mode & 0o777 == 0o600

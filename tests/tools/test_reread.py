"""Read again: a pointer only for byte-identical content still in the request, else the changes or the file."""

from __future__ import annotations

import asyncio
import re
import tempfile
from pathlib import Path

import msgspec
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from lamina.session import ReadStamp, ToolResult
from lamina.tokens import DEFAULT_ESTIMATOR
from lamina.tools import ReadTool, ToolContext
from lamina.tools._reread import shown_of
from tests.conftest import examples

_HUNK = re.compile(r"@@ -(\d+),(\d+) \+(\d+),(\d+) @@")


def _read(root: Path, held: list[ToolResult], call_id: str, offset: int | None, limit: int | None) -> ToolResult:
    """One Read of `f.txt` with `held` as what the request holds; the result as the loop logs it."""
    ctx = ToolContext(cwd=root, data_dir=root / ".data", request_results=lambda: tuple(held))
    raw: dict[str, object] = {"path": "f.txt"}
    if offset is not None:
        raw["offset"] = offset
    if limit is not None:
        raw["limit"] = limit
    tool = ReadTool()
    output = tool._run_sync(tool.validate(raw), ctx)  # what `run` runs in a thread
    return ToolResult(call_id=call_id, name="Read", content=output.content, is_error=output.is_error, read=output.read)


def _apply(base: str, diff: str) -> list[str]:
    """The rows (`N\\ttext`) the model gets by applying `diff`'s hunks to `base`'s rows."""
    old = shown_of(base)
    assert old is not None
    texts = list(old.texts)
    lines = diff.split("\n")[1:]
    shift = 0
    i = 0
    while i < len(lines) and (hunk := _HUNK.fullmatch(lines[i])):
        start, count = int(hunk.group(1)) - old.first, int(hunk.group(2))
        i += 1
        removed = lines[i : i + count]
        assert [f"-{t}" for t in texts[start + shift : start + shift + count]] == removed
        i += count
        added: list[str] = []
        while i < len(lines) and lines[i].startswith("+"):
            added.append(lines[i][1:].split("\t", 1)[1])
            i += 1
        texts[start + shift : start + shift + count] = added
        shift += len(added) - count
    return [f"{old.first + n}\t{t}" for n, t in enumerate(texts)]


_texts = ["a", "b", "", "é", "def total(xs):", "    return sum(x for x in xs if x is not None) + offset", "# end"]
_lines = st.lists(st.sampled_from(_texts), min_size=4, max_size=40)
_edit = st.tuples(st.integers(0, 40), st.integers(0, 3), st.lists(st.sampled_from(_texts), max_size=3))
_window = st.tuples(st.one_of(st.none(), st.integers(1, 5)), st.one_of(st.none(), st.integers(1, 40)))


@pytest.mark.slow
@settings(max_examples=examples(100), deadline=None)
@given(
    before=_lines,
    after=st.one_of(st.none(), _lines, _edit),
    first=_window,
    second=st.one_of(st.none(), _window),
    pruned=st.booleans(),
)
def test_a_pointer_is_sent_only_for_byte_identical_content_still_in_the_request(
    before: list[str],
    after: list[str] | tuple[int, int, list[str]] | None,
    first: tuple[int | None, int | None],
    second: tuple[int | None, int | None] | None,
    pruned: bool,
) -> None:
    """The file unchanged, rewritten or edited in a few lines; the same window or another; the result pruned or not."""
    second = first if second is None else second
    if after is None:
        after = before
    elif isinstance(after, tuple):  # a small edit
        at, dropped, added = after
        after = before[:at] + added + before[at + dropped :] or ["x"]
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        file = root / "f.txt"
        file.write_text("\n".join(before) + "\n", encoding="utf-8")
        earlier = _read(root, [], "c1", *first)
        if earlier.is_error:
            return
        held = earlier
        if pruned:  # the view shows a pruned result's note; its stamp stays on the entry
            held = msgspec.structs.replace(earlier, content='[output pruned from context: Read {"path": "f.txt"}]')
        file.write_text("\n".join(after) + "\n", encoding="utf-8")
        again = _read(root, [held], "c2", *second)
        if again.is_error:
            return
        full = _read(root, [], "c3", *second)
        assert again.read is not None and earlier.read is not None
        event("pointer" if again.read.unchanged_from else "changes" if again.read.changes_from else "whole")
        window = (first[0] or 1, first[1]) == (second[0] or 1, second[1])  # no offset is offset 1
        identical = file.read_bytes() == ("\n".join(before) + "\n").encode() and window
        if again.read.unchanged_from is not None:
            assert identical and not pruned and again.read.unchanged_from == "c1"
            assert earlier.content == full.content  # the bytes the request holds are the bytes Read would send
        elif identical and not pruned:
            raise AssertionError("an unchanged file still in the request was sent again")
        if again.read.changes_from is not None:
            assert not pruned and window
            rows = [line for line in full.content.split("\n") if not line.startswith("[")]
            assert _apply(earlier.content, again.content) == rows
            assert DEFAULT_ESTIMATOR.count(again.content) < DEFAULT_ESTIMATOR.count(full.content)  # chosen as smaller
        if again.read.unchanged_from is None and again.read.changes_from is None:
            assert again.content == full.content


def test_a_changed_line_is_sent_as_one_hunk_numbered_as_the_file_is_now(tmp_path: Path) -> None:
    lines = [f"line {n}" for n in range(1, 201)]
    (tmp_path / "f.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    first = _read(tmp_path, [], "c1", None, None)
    lines[99:100] = ["line 100 changed", "a new line"]
    (tmp_path / "f.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    again = _read(tmp_path, [first], "c2", None, None)
    assert again.read is not None and again.read.changes_from == "c1"
    hunk = ["@@ -100,1 +100,2 @@", "-line 100", "+100\tline 100 changed", "+101\ta new line"]
    assert again.content.split("\n")[1:] == hunk
    assert again.content.startswith("[f.txt changed since the latest Read of these lines")
    # read once more, unchanged: a pointer to the changes, which the request holds with their base
    third = _read(tmp_path, [first, again], "c3", None, None)
    assert third.read is not None and third.read.unchanged_from == "c2"
    assert third.content == "[f.txt is unchanged since the latest Read of these lines; that result above is current]"
    # without the base the changes mean nothing: the whole file again
    alone = _read(tmp_path, [again], "c4", None, None)
    assert alone.read is not None and alone.read.unchanged_from is None and alone.content.startswith("1\tline 1\n")


def test_another_window_or_a_rewritten_file_gets_the_whole_window(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("".join(f"{n}\n" for n in range(50)), encoding="utf-8")
    first = _read(tmp_path, [], "c1", None, None)
    other = _read(tmp_path, [first], "c2", 10, 5)
    assert other.content.startswith("10\t9\n") and other.read == ReadStamp(
        path=str((tmp_path / "f.txt").resolve()), sha256=first.read.sha256 if first.read else "", offset=10, limit=5
    )
    (tmp_path / "f.txt").write_text("".join(f"new {n}\n" for n in range(50)), encoding="utf-8")
    rewritten = _read(tmp_path, [first, other], "c3", None, None)
    assert rewritten.read is not None and rewritten.read.changes_from is None
    assert rewritten.content.startswith("1\tnew 0\n")  # every line changed: the changes are not smaller


def test_without_a_view_read_sends_the_file_and_stamps_it(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("x\n", encoding="utf-8")
    tool = ReadTool()
    ctx = ToolContext(cwd=tmp_path, data_dir=tmp_path / ".data")
    output = asyncio.run(tool.run(tool.validate({"path": "f.txt"}), ctx))
    assert output.content == "1\tx" and output.read is not None and output.read.offset == 1

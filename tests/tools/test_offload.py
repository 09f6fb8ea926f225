"""Large tool results: written to the data folder, previewed with head and tail, readable by Read."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from lamina.errors import UsageError
from lamina.tokens import DEFAULT_ESTIMATOR
from lamina.tools import Deny, OffloadPolicy, StructTool, ToolContext, ToolOutput, default_tools
from lamina.tools._offload import offload_result, offload_threshold, result_path
from tests.tools.conftest import Session


class BlobInput(msgspec.Struct, forbid_unknown_fields=True):
    lines: int
    fail: bool = False


class BlobTool(StructTool[BlobInput]):
    """A custom (not built-in) read-only tool with a large result."""

    name = "Blob"
    description = "Numbered lines."
    read_only = True
    input_type = BlobInput

    async def run(self, input: BlobInput, ctx: ToolContext) -> ToolOutput:
        return ToolOutput("".join(f"row {i:06d}\n" for i in range(1, input.lines + 1)), is_error=input.fail)


def big_session(session: Session, threshold: int = 2_000) -> Session:
    return session.with_tools([*default_tools(), BlobTool()], offload=OffloadPolicy(threshold_tokens=threshold))


# --- the threshold ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("window", "threshold"),
    [(1_000, 2_000), (20_000, 2_000), (50_000, 5_000), (100_000, 10_000), (120_000, 12_000), (1_000_000, 12_000)],
)
def test_the_threshold_is_a_tenth_of_the_window_clamped_to_2000_12000(window: int, threshold: int) -> None:
    assert offload_threshold(window) == threshold
    assert OffloadPolicy.for_context_window(window).threshold_tokens == threshold


def test_the_threshold_is_configurable() -> None:
    assert offload_threshold(100_000, fraction=0.2, maximum=50_000) == 20_000
    assert offload_threshold(10_000, minimum=500) == 1_000
    assert OffloadPolicy(threshold_tokens=3_000).threshold_tokens == 3_000


@pytest.mark.parametrize(
    "call",
    [
        lambda: offload_threshold(0),
        lambda: offload_threshold(1_000, fraction=0),
        lambda: offload_threshold(1_000, minimum=10, maximum=5),
        lambda: OffloadPolicy(threshold_tokens=0),
        lambda: OffloadPolicy(threshold_tokens=100, preview_tokens=100),
    ],
)
def test_bad_threshold_settings_are_usage_errors(call: object) -> None:
    with pytest.raises(UsageError):
        call()  # type: ignore[operator]


# --- offloading through the pipeline ------------------------------------------------------------------------


async def test_a_result_above_the_threshold_is_written_to_the_data_folder(session: Session) -> None:
    s = big_session(session)
    result = await s.call("Blob", call_id="toolu_01", lines=5_000)
    full = "".join(f"row {i:06d}\n" for i in range(1, 5_001))
    assert result.full_output_path == s.data / "tool-results" / "toolu_01.txt"
    assert result.full_output_path.read_text() == full
    assert not result.is_error


async def test_the_preview_has_head_tail_path_and_size_within_budget(session: Session) -> None:
    s = big_session(session)
    result = await s.call("Blob", call_id="toolu_01", lines=5_000)
    preview = result.content
    assert str(s.data / "tool-results" / "toolu_01.txt") in preview
    assert "55,000 characters" in preview
    assert "5,000 lines" in preview
    assert preview.splitlines()[1] == "row 000001"
    assert preview.splitlines()[-1] == "row 005000"
    assert re.search(r"^\[… lines 9\d–4,9\d\d omitted \([\d,]+ characters\) …\]$", preview, re.MULTILINE)
    assert DEFAULT_ESTIMATOR.count(preview) < 2_000


async def test_read_can_open_the_offloaded_file(session: Session) -> None:
    s = big_session(session)
    result = await s.call("Blob", call_id="toolu_01", lines=5_000)
    assert result.full_output_path is not None
    opened = await s.call("Read", path=str(result.full_output_path), offset=2_500, limit=2)
    assert not opened.is_error
    assert opened.content.splitlines()[:2] == ["2500\trow 002500", "2501\trow 002501"]
    found = await s.call("Grep", pattern="row 004321", path=str(result.full_output_path), output_mode="content")
    assert found.content.endswith(":4321:row 004321")


async def test_the_data_folder_is_not_writable_through_tools(session: Session) -> None:
    s = big_session(session)
    result = await s.call("Blob", call_id="toolu_01", lines=5_000)
    assert result.full_output_path is not None
    write = await s.call("Write", path=str(result.full_output_path), content="tampered")
    assert isinstance(write.decision, Deny) and write.decision.by == "path_bounds"


async def test_a_result_under_the_threshold_is_left_alone(session: Session) -> None:
    s = big_session(session)
    result = await s.call("Blob", lines=10)
    assert result.full_output_path is None
    assert result.content.startswith("row 000001\n")
    assert not (s.data / "tool-results").exists()


async def test_an_error_result_is_offloaded_and_stays_an_error(session: Session) -> None:
    s = big_session(session)
    result = await s.call("Blob", lines=5_000, fail=True)
    assert result.is_error
    assert result.full_output_path is not None


async def test_built_in_tools_are_offloaded_too(session: Session) -> None:
    s = big_session(session)
    result = await s.call("Bash", call_id="bash-1", command="seq 1 20000")
    assert result.full_output_path == s.data / "tool-results" / "bash-1.txt"
    assert result.full_output_path.read_text().startswith("1\n2\n3\n")
    assert "20000" in result.content.splitlines()[-2]


async def test_a_call_id_cannot_leave_the_results_folder(session: Session) -> None:
    s = big_session(session)
    result = await s.call("Blob", call_id="../../../escaped", lines=5_000)
    assert result.full_output_path is not None
    assert result.full_output_path.parent == s.data / "tool-results"
    assert not any(s.data.parent.rglob("escaped.txt"))


@pytest.mark.parametrize("call_id", ["../x", "/etc/passwd", ".hidden", "", "a/b", "..", "é"])
def test_result_names_are_single_safe_file_names(tmp_path: Path, call_id: str) -> None:
    path = result_path(tmp_path, call_id)
    assert path.parent == tmp_path / "tool-results"
    assert not path.name.startswith(".")
    assert "/" not in path.name


def test_different_ids_never_share_a_file(tmp_path: Path) -> None:
    ids = ["a/b", "a_b", "a:b", "a b", "../a_b"]
    assert len({result_path(tmp_path, i) for i in ids}) == len(ids)


def test_a_result_that_cannot_be_saved_still_gets_a_preview(tmp_path: Path) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("a file where the data folder should be")
    content = "".join(f"row {i}\n" for i in range(5_000))
    result = offload_result(
        content,
        call_id="c",
        data_dir=blocker,
        policy=OffloadPolicy(threshold_tokens=2_000),
        estimator=DEFAULT_ESTIMATOR,
    )
    assert result is not None
    assert result.path is None
    assert "could not be saved" in result.preview
    assert result.preview.splitlines()[1] == "row 0"


def test_a_single_huge_line_is_cut_within_budget(tmp_path: Path) -> None:
    content = "x" * 200_000
    result = offload_result(
        content,
        call_id="c",
        data_dir=tmp_path,
        policy=OffloadPolicy(threshold_tokens=2_000),
        estimator=DEFAULT_ESTIMATOR,
    )
    assert result is not None
    assert DEFAULT_ESTIMATOR.count(result.preview) < 2_000
    assert result.path is not None and result.path.read_text() == content


def test_a_link_planted_in_the_data_folder_cannot_send_a_result_outside(tmp_path: Path) -> None:
    data, outside = tmp_path / "data", tmp_path / "outside"
    data.mkdir()
    outside.mkdir()
    (data / "tool-results").symlink_to(outside, target_is_directory=True)  # as a command could plant it
    content = "".join(f"row {i}\n" for i in range(5_000))
    result = offload_result(
        content, call_id="c", data_dir=data, policy=OffloadPolicy(threshold_tokens=2_000), estimator=DEFAULT_ESTIMATOR
    )
    assert result is not None and result.path is None
    assert "could not be saved" in result.preview
    assert list(outside.iterdir()) == []

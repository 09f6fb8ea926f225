"""Required reads: blocking and gated requirements, what counts as a read, stuck agents, context files."""

from __future__ import annotations

from pathlib import Path

import pytest

from lamina.errors import UsageError
from lamina.tools import (
    Allow,
    BoundCall,
    Deny,
    NearestContextFileRule,
    PrerequisiteManager,
    Requirement,
    Rule,
    ToolExecution,
    Verdict,
    default_tools,
)
from lamina.workspace import ContextFileFinder
from tests.support.sandbox import BASH_SANDBOX
from tests.tools.conftest import Session

SKILL = "skills/x/SKILL.md"


class DenyReads(Rule):
    """A rule after the prerequisites rule that refuses every Read."""

    async def check(self, call: BoundCall) -> Verdict:
        return Deny("no reading today") if call.name == "Read" else Allow()


def with_manager(session: Session, manager: PrerequisiteManager, *extra: Rule) -> Session:
    return session.with_tools(default_tools(sandbox=BASH_SANDBOX), rules=[manager.rule(), *extra])


def skill(session: Session, manager: PrerequisiteManager, name: str = "x") -> Requirement:
    session.put(f"skills/{name}/SKILL.md", f"# {name}\nsteps\n")
    return manager.require(f"skills/{name}/SKILL.md", cwd=session.root, reason=f"skill {name!r}", key=f"skill:{name}")


def refused_by(result: ToolExecution) -> str | None:
    """The stage that refused the call, or None if it ran."""
    return result.decision.by if isinstance(result.decision, Deny) else None


def only_glob(call: BoundCall) -> bool:
    return call.name == "Glob"


async def test_blocking_requirement_denies_other_tools_naming_file_and_reason(session: Session) -> None:
    manager = PrerequisiteManager()
    requirement = skill(session, manager)
    s = with_manager(session, manager)
    result = await s.call("Glob", pattern="*")
    assert result.is_error
    assert result.decision == Deny(
        f"Read {session.root / SKILL} first: skill 'x' requires it. Other tools are blocked until then.",
        by="rule:prerequisites",
    )
    assert manager.pending() == (requirement,)
    read = await s.call("Read", path=SKILL)
    assert not read.is_error
    assert manager.pending() == ()
    assert not (await s.call("Glob", pattern="*")).is_error


async def test_second_attempt_does_not_bypass_requirement(session: Session) -> None:
    manager = PrerequisiteManager()
    skill(session, manager)
    s = with_manager(session, manager)
    for call_id in ("c1", "c2", "c3", "c4"):
        result = await s.call("Bash", call_id, command="echo hi")
        assert result.is_error and refused_by(result) == "rule:prerequisites"
    assert manager.denials("skill:x") == 4


async def test_one_read_does_not_clear_other_pending_requirements(session: Session) -> None:
    manager = PrerequisiteManager()
    skill(session, manager, "x")
    other = skill(session, manager, "y")
    s = with_manager(session, manager)
    assert not (await s.call("Read", path=SKILL)).is_error
    assert manager.pending() == (other,)
    denied = await s.call("Glob", pattern="*")
    assert denied.is_error and "skills/y/SKILL.md" in denied.content and "skills/x" not in denied.content


async def test_read_of_missing_file_does_not_count(session: Session) -> None:
    manager = PrerequisiteManager()
    requirement = manager.require(SKILL, cwd=session.root, reason="skill 'x'", key="skill:x")
    s = with_manager(session, manager)
    result = await s.call("Read", path=SKILL)
    assert result.is_error and result.decision.kind == "allow"  # ran, and failed
    assert manager.pending() == (requirement,)
    assert not manager.has_read(session.root / SKILL)
    session.put(SKILL)
    assert manager.pending() == (requirement,)  # the file appearing later is not a read either


async def test_bash_read_that_fails_does_not_count(session: Session) -> None:
    manager = PrerequisiteManager()
    requirement = manager.require(SKILL, cwd=session.root, reason="skill 'x'", key="skill:x")
    s = with_manager(session, manager)
    for command in (f"cat {SKILL}", f"cat {SKILL} | head -n 3"):
        result = await s.call("Bash", command=command)
        assert result.decision.kind == "allow"
    assert manager.pending() == (requirement,)


async def test_read_denied_by_path_bounds_does_not_count(session: Session) -> None:
    manager = PrerequisiteManager()
    outside = session.put("SKILL.md", base=session.outside)
    requirement = manager.require(outside, reason="skill 'out'", key="skill:out")
    s = with_manager(session, manager)
    result = await s.call("Read", path=str(outside))
    assert refused_by(result) == "path_bounds"
    assert manager.pending() == (requirement,)


async def test_read_denied_by_later_rule_does_not_count(session: Session) -> None:
    manager = PrerequisiteManager()
    requirement = skill(session, manager)
    s = with_manager(session, manager, DenyReads())
    result = await s.call("Read", path=SKILL)
    assert refused_by(result) == "rule:DenyReads"
    assert manager.pending() == (requirement,)
    assert not manager.has_read(requirement.path)


async def test_relative_paths_resolve_against_session_cwd_not_process_cwd(
    session: Session, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "skills/x").mkdir(parents=True)
    (elsewhere / SKILL).write_text("decoy\n")
    monkeypatch.chdir(elsewhere)
    manager = PrerequisiteManager()
    requirement = skill(session, manager)
    assert requirement.path == session.root / SKILL
    s = with_manager(session, manager)
    assert not (await s.call("Read", path=SKILL)).is_error
    assert manager.pending() == ()
    assert manager.has_read(session.root / SKILL)
    assert not manager.has_read(elsewhere / SKILL)
    assert not manager.has_read(SKILL)  # relative: no process cwd is ever consulted


async def test_requirement_path_is_normalised(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    manager = PrerequisiteManager()
    session.put(SKILL)
    (session.root / "link").symlink_to(session.root / "skills")
    monkeypatch.setenv("HOME", str(session.root))
    for raw in ("link/x/SKILL.md", "skills/y/../x/SKILL.md", f"~/{SKILL}"):
        assert manager.require(raw, cwd=session.root, reason="r", key="k").path == session.root / SKILL


def test_relative_requirement_without_cwd_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="relative"):
        PrerequisiteManager().require(SKILL, reason="skill 'x'", key="skill:x")


@pytest.mark.parametrize(
    "command",
    [
        f"echo {SKILL}",
        f"cat {SKILL}.bak",
        f"ls {SKILL}",
        "ls SKILL.md",
        f"echo cat {SKILL}",
        f"cat {SKILL.replace('SKILL', 'OTHER')}",
        "cd skills/x && echo SKILL.md",
        f"sed -i 's/a/b/' {SKILL}",
        f"sed -n 's/a/b/w out' {SKILL}",
        "cat SKILL.md",  # relative to the session cwd, where there is no SKILL.md
    ],
)
async def test_bash_substring_does_not_count_as_read(session: Session, command: str) -> None:
    manager = PrerequisiteManager()
    session.put(f"{SKILL}.bak")
    session.put(SKILL.replace("SKILL", "OTHER"))
    session.put(SKILL)
    manager.require(SKILL, cwd=session.root, reason="guide", key="guide:x", applies_to=only_glob)
    s = with_manager(session, manager)
    result = await s.call("Bash", command=command)
    assert result.decision.kind == "allow"
    assert not manager.has_read(session.root / SKILL)
    assert len(manager.pending()) == 1


@pytest.mark.parametrize(
    "command",
    [
        f"cat {SKILL}",
        "head -n 5 ./skills/x/../x/SKILL.md",
        f"sed -n '1,40p' {SKILL}",
        f"tail -n 2 {SKILL}",
        f"nl {SKILL}",
        f"true && cat -- {SKILL} | wc -l",
        f"grep -n steps {SKILL}",
        f"awk '{{print}}' {SKILL}",
        "cd skills/x && cat SKILL.md",
        f"echo start; /bin/cat {SKILL} 2>/dev/null",
    ],
)
async def test_bash_reader_counts_as_read(session: Session, command: str) -> None:
    manager = PrerequisiteManager()
    session.put(SKILL, "# x\nsteps\n")
    manager.require(SKILL, cwd=session.root, reason="guide", key="guide:x", applies_to=only_glob)
    s = with_manager(session, manager)
    result = await s.call("Bash", command=command)
    assert result.decision.kind == "allow", result.content
    assert manager.has_read(session.root / SKILL), result.content
    assert manager.pending() == ()


@pytest.mark.parametrize(
    "command",
    [f"cat {SKILL}", "head -n 5 ./skills/x/../x/SKILL.md", f"sed -n '1,40p' {SKILL}"],
)
async def test_bash_read_of_required_file_passes_blocking_requirement(session: Session, command: str) -> None:
    manager = PrerequisiteManager()
    skill(session, manager)
    s = with_manager(session, manager)
    result = await s.call("Bash", command=command)
    assert result.decision.kind == "allow"
    assert manager.pending() == ()


@pytest.mark.parametrize(
    "command",
    [
        f"cat {SKILL} && touch pwned",
        f"cat {SKILL}\ntouch pwned",
        f"cat {SKILL} > pwned",
        f"awk 'BEGIN {{ system(\"touch pwned\") }}' {SKILL}",
        f"cat {SKILL} `touch pwned`",
        f"cat {SKILL} $(touch pwned)",
    ],
)
async def test_read_plus_other_work_does_not_pass_blocking_requirement(session: Session, command: str) -> None:
    manager = PrerequisiteManager()
    skill(session, manager)
    s = with_manager(session, manager)
    result = await s.call("Bash", command=command)
    assert refused_by(result) == "rule:prerequisites"
    assert not (session.root / "pwned").exists()
    assert len(manager.pending()) == 1


async def test_reset_after_compaction_forgets_reads_and_reopens_gated_requirements(session: Session) -> None:
    manager = PrerequisiteManager()
    blocking = skill(session, manager)
    session.put("sources/gh/guide.md")
    gated = manager.require("sources/gh/guide.md", cwd=session.root, reason="the gh source", key="guide:gh",
                            applies_to=only_glob)  # fmt: skip
    s = with_manager(session, manager)
    await s.call("Read", path=SKILL)
    await s.call("Read", path="sources/gh/guide.md")
    assert manager.pending() == ()
    manager.reset()
    assert manager.pending() == (gated,)
    assert not manager.has_read(blocking.path) and not manager.has_read(gated.path)
    assert refused_by(await s.call("Glob", pattern="*")) == "rule:prerequisites"
    assert (await s.call("Bash", command="echo hi")).decision.kind == "allow"  # the met skill stays met
    again = manager.require(SKILL, cwd=session.root, reason="skill 'x'", key="skill:x")  # the owner re-registers
    assert set(manager.pending()) == {gated, again}


async def test_gated_requirement_blocks_only_its_tools(session: Session) -> None:
    manager = PrerequisiteManager()
    session.put("sources/gh/guide.md")
    manager.require("sources/gh/guide.md", cwd=session.root, reason="the gh source", key="guide:gh",
                    applies_to=only_glob)  # fmt: skip
    s = with_manager(session, manager)
    assert (await s.call("Bash", command="echo hi")).decision.kind == "allow"
    assert (await s.call("Read", path="sources/gh/guide.md")).decision.kind == "allow"
    denied_before = manager.denials("guide:gh")
    manager.reset()
    glob = await s.call("Glob", pattern="*")
    assert refused_by(glob) == "rule:prerequisites"
    assert glob.content.endswith("Glob is blocked until then.")
    assert manager.denials("guide:gh") == denied_before + 1


async def test_strict_mode_reports_stuck_once_and_keeps_blocking(session: Session) -> None:
    stuck: list[tuple[str, int]] = []
    manager = PrerequisiteManager(stuck_after=3, on_stuck=lambda r, n: stuck.append((r.key, n)))
    skill(session, manager)
    s = with_manager(session, manager)
    for attempt in range(1, 7):
        assert refused_by(await s.call("Glob", pattern="*")) == "rule:prerequisites"
        assert stuck == ([] if attempt < 3 else [("skill:x", 3)])
    assert manager.denials("skill:x") == 6
    assert manager.notices() == ()


async def test_lenient_mode_lets_through_after_stuck_with_visible_notice(session: Session) -> None:
    stuck: list[int] = []
    manager = PrerequisiteManager(strict=False, stuck_after=2, on_stuck=lambda r, n: stuck.append(n))
    requirement = skill(session, manager)
    s = with_manager(session, manager)
    assert (await s.call("Glob", "c1", pattern="*")).is_error
    assert (await s.call("Glob", "c2", pattern="*")).is_error
    assert stuck == [2] and manager.notices() == ()
    result = await s.call("Glob", "c3", pattern="*")
    assert result.decision.kind == "allow"
    (notice,) = manager.notices()
    assert (notice.kind, notice.requirement, notice.call_id, notice.tool, notice.denials) == (
        "bypassed", requirement, "c3", "Glob", 2
    )  # fmt: skip
    assert str(requirement.path) in notice.message
    assert manager.pending() == (requirement,)  # let through, not met


async def test_reading_clears_the_stuck_count(session: Session) -> None:
    manager = PrerequisiteManager()
    skill(session, manager)
    s = with_manager(session, manager)
    await s.call("Glob", pattern="*")
    await s.call("Read", path=SKILL)
    assert manager.denials("skill:x") == 0


async def test_nearest_context_files_gate_edit_and_write_in_monorepo(session: Session) -> None:
    root_guide = session.put("AGENTS.md", "root rules\n")
    package_guide = session.put("packages/a/AGENTS.md", "package rules\n")
    session.put("packages/a/x.py", "x = 1\n")
    finder = ContextFileFinder()
    manager = PrerequisiteManager()
    rule = NearestContextFileRule(manager, lambda path: [f.path for f in finder.nearest(session.root, path)])
    s = session.with_tools(default_tools(sandbox=BASH_SANDBOX), rules=[manager.rule(), rule])

    edit = {"path": "packages/a/x.py", "old_string": "1", "new_string": "2"}
    denied = await s.call("Edit", **edit)
    assert refused_by(denied) == "rule:nearest_context_file"
    assert str(root_guide) in denied.content and str(package_guide) in denied.content
    assert (await s.call("Read", path="AGENTS.md")).decision.kind == "allow"
    denied = await s.call("Edit", **edit)
    assert str(package_guide) in denied.content and str(root_guide) not in denied.content
    assert not (await s.call("Write", path="packages/b/new.py", content="")).is_error  # governed by the root only
    assert (await s.call("Bash", command="cat packages/a/AGENTS.md")).decision.kind == "allow"
    assert not (await s.call("Edit", **edit)).is_error
    assert (session.root / "packages/a/x.py").read_text() == "x = 2\n"
    manager.reset()
    assert refused_by(await s.call("Write", path="packages/a/x.py", content="")) == "rule:nearest_context_file"
    assert (await s.call("Bash", command="echo fine")).decision.kind == "allow"  # only Edit and Write are gated


async def test_read_that_fails_on_an_existing_file_does_not_count(session: Session) -> None:
    manager = PrerequisiteManager()
    session.put(SKILL, b"\0binary")
    requirement = manager.require(SKILL, cwd=session.root, reason="skill 'x'", key="skill:x")
    s = with_manager(session, manager)
    result = await s.call("Read", path=SKILL)
    assert result.is_error and result.decision.kind == "allow"
    assert manager.pending() == (requirement,)


async def test_bash_read_with_failing_exit_code_does_not_count(session: Session) -> None:
    manager = PrerequisiteManager()
    session.put(SKILL)
    manager.require(SKILL, cwd=session.root, reason="guide", key="guide:x", applies_to=only_glob)
    s = with_manager(session, manager)
    result = await s.call("Bash", command=f"cat {SKILL} missing.txt")
    assert result.decision.kind == "allow" and "[exit code 1]" in result.content
    assert not manager.has_read(session.root / SKILL)

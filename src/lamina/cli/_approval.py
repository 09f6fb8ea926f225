"""Ask mode in the terminal: show a tool call (a coloured diff for Edit and Write), answer with one key (I/O).

`y` runs the call, `n` refuses it, `a` allows it and the like for the rest of the session (the
tool, or for Bash the command's prefix: `lamina.cli._permissions.always_rules`), `s` does that and
saves the rule in the workspace's personal file (kept out of git), `t` in the team's file, `e`
refuses it with the user's words for the model.
Allow rules of the config files answer before asking; `DenyRules` refuses before anything asks. A
call that writes a protected path is asked about with `y`, `n` and `e` only, and no rule answers.
"""

from __future__ import annotations

import asyncio
import difflib
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec

from lamina.cli._config import LOCAL_CONFIG, WORKSPACE_CONFIG, save_allowed
from lamina.cli._console import err, safe
from lamina.cli._git_exclude import exclude_from_git
from lamina.cli._permissions import PermissionRule, Permissions, always_rules, refused_because, relative_paths
from lamina.defang import show_controls
from lamina.errors import ConfigError
from lamina.tools import Allow, BoundCall, Deny, PermissionRequest, Rule

if TYPE_CHECKING:
    from lamina.cli._user_input import LineReader

MAX_DIFF_LINES: Final = 80
"""Diff lines shown before the rest is summarised as a count."""
MAX_VALUE_CHARS: Final = 400
"""Characters of one input field shown in the approval prompt."""
DECLINED: Final = "the user declined this call"
KEYS: Final = "nyaste"
"""The answers, one key each; the first is what an empty line means when reading from a pipe."""
PROTECTED_KEYS: Final = "nye"
"""The answers about a call that writes a protected path: no "always"."""


def declined_with(text: str) -> str:
    """The refusal the model receives when the user declined and said why (`e`)."""
    return f"The user declined this call and said: {text}"


class Approver:
    """The `ask` callback of an interactive session: prompts for every call the mode or a rule asks about."""

    def __init__(
        self, reader: LineReader, permissions: Permissions | None = None, *, workspace: Path, trusted: bool = True
    ) -> None:
        self._reader = reader
        self._workspace = workspace
        self._trusted = trusted
        """Whether the workspace is trusted (a rule saved in an untrusted one applies only once it is)."""
        self.permissions = permissions or Permissions()
        """The config files' rules and those "always" added in this session."""

    async def __call__(self, request: PermissionRequest) -> Allow | Deny:
        call = request.call
        if request.protected:
            return await self._protected(request)
        allowed = allowed_by(self.permissions, call)
        if allowed:
            print_allowed(call.name, allowed)
            return Allow()
        command, _ = call_target(call)
        show_call(request)
        always = always_rules(call.name, command)
        covers = show_controls(", ".join(rule.text for rule in always))
        question = (
            f"Allow {show_controls(call.name)}? y yes · n no · a always {covers} · "
            f"s always, saved for you ({LOCAL_CONFIG}) · t always, saved for the team ({WORKSPACE_CONFIG}) · "
            "e no, and tell the model why: "
        )
        while True:
            answer = await self._key(question)
            match answer:
                case "y":
                    return Allow()
                case "n":
                    err.print(f"[dim]declined {safe(call.name)}[/dim]")
                    return Deny(DECLINED)
                case "a" | "s" | "t":
                    saved = {"a": None, "s": LOCAL_CONFIG, "t": WORKSPACE_CONFIG}[answer]
                    return self._allow_always(always, save=saved)
                case "e":
                    return await self._explain(call.name)
                case _:
                    err.print(
                        "answer y (yes), n (no), a (always), s (always, saved for you), "
                        "t (always, saved for the team) or e (no, and say why)"
                    )

    async def _protected(self, request: PermissionRequest) -> Allow | Deny:
        """Ask about a call that writes a protected path: once, by the user, whatever the rules say."""
        show_call(request)
        name = show_controls(request.call.name)
        question = f"Allow {name} this once? y yes · n no · e no, and tell the model why: "
        while True:
            match await self._key(question, PROTECTED_KEYS):
                case "y":
                    return Allow()
                case "n":
                    err.print(f"[dim]declined {safe(request.call.name)}[/dim]")
                    return Deny(DECLINED)
                case "e":
                    return await self._explain(request.call.name)
                case _:
                    err.print("answer y (yes), n (no) or e (no, and say why)")

    async def _key(self, question: str, keys: str = KEYS) -> str:
        try:
            return await self._reader.key(question, keys)
        except EOFError:
            return "n"
        except KeyboardInterrupt:
            await _cancel_turn()
            raise AssertionError("unreachable: the task was cancelled") from None

    def _allow_always(self, rules: tuple[PermissionRule, ...], *, save: Path | None) -> Allow:
        """Allow `rules` for the session; `save`: also in that workspace file (the personal one kept out of git)."""
        self.permissions = self.permissions.with_allowed(rules)
        shown = ", ".join(rule.text for rule in rules)
        err.print(f"[dim]{safe(shown)} is allowed for the rest of this session[/dim]")
        if save is not None:
            try:
                path = save_allowed(self._workspace, rules, file=save)
            except ConfigError as exc:
                err.print(f"[yellow]not saved:[/yellow] {safe(exc)}")
            else:
                later = "" if self._trusted else " (later sessions use it once you trust this folder: `lamina trust`)"
                err.print(f"[dim]saved in {safe(path)}{later}[/dim]")
                if save == LOCAL_CONFIG:
                    _keep_out_of_git(path)
        return Allow()

    async def _explain(self, name: str) -> Deny:
        try:
            text = (await self._reader.answer("what should the model do instead? ")).strip()
        except EOFError:
            text = ""
        except KeyboardInterrupt:
            await _cancel_turn()
            raise AssertionError("unreachable: the task was cancelled") from None
        err.print(f"[dim]declined {safe(name)}{', with your answer' if text else ''}[/dim]")
        return Deny(declined_with(text) if text else DECLINED)


def _keep_out_of_git(path: Path) -> None:
    """The personal file named in its repository's exclude file, or a line saying it could not be."""
    try:
        exclude_from_git(path)
    except OSError as exc:
        err.print(f"[yellow]not kept out of git:[/yellow] {safe(exc)} (add {safe(path.name)} to .gitignore)")


async def _cancel_turn() -> None:
    """Ctrl-C at a question cancels the whole turn (the agent records the call as interrupted)."""
    task = asyncio.current_task()
    assert task is not None
    task.cancel()
    await asyncio.sleep(0)


def allowed_by(permissions: Permissions, call: BoundCall) -> tuple[PermissionRule, ...]:
    """The allow rules that answer yes to `call` without asking (empty: none does, or a deny rule refuses it).

    Chat's `Approver` and `lamina run` both ask this, so a rule means the same in both.
    """
    command, paths = call_target(call)
    return permissions.allowing(call.name, command, paths)


def named_rule(rule: PermissionRule) -> str:
    """A rule as the user is told about it: its text, and the config file it came from."""
    return rule.text if rule.origin == "this session" else f"{rule.text} ({rule.origin})"


def print_allowed(name: str, rules: tuple[PermissionRule, ...]) -> None:
    """The dim stderr line saying which rules allowed a call of `name` without asking."""
    err.print(f"[dim]{safe(name)} allowed by {safe(', '.join(named_rule(rule) for rule in rules))}[/dim]")


def call_fields(value: Any) -> dict[str, Any]:
    """A tool input (a msgspec struct after validation, or a mapping) as a plain dict."""
    if isinstance(value, msgspec.Struct):
        return msgspec.structs.asdict(value)
    if isinstance(value, Mapping):
        return dict(value)
    return {"input": value}


def show_call(request: PermissionRequest) -> None:
    """Print the call the user is asked about: its fields, and for Edit and Write the change as a diff."""
    call = request.call
    fields = call_fields(call.input)
    # ask mode's own question only repeats the call; a rule's question says why it asks
    why = "" if request.asked_by == "permission_mode" else f" [dim]{safe(request.question)}[/dim]"
    err.print(f"\n[bold yellow]?[/bold yellow] [bold]{safe(call.name)}[/bold]{why}")
    diff = _proposed_change(call.name, fields, call.paths)
    shown = {"old_string", "new_string", "content"} if diff is not None else set()
    for key, value in fields.items():
        if key in shown or value is None or value is False:
            continue
        text = value if isinstance(value, str) else msgspec.json.encode(value).decode()
        if len(text) > MAX_VALUE_CHARS:
            text = text[:MAX_VALUE_CHARS] + f"… ({len(text) - MAX_VALUE_CHARS:,} more characters)"
        err.print(f"  [cyan]{safe(key)}[/cyan]: {safe(text)}")
    if diff is not None:
        print_diff(diff)


def _proposed_change(name: str, fields: Mapping[str, Any], paths: tuple[Path, ...]) -> list[str] | None:
    """The unified diff an Edit or Write would make (None for other tools)."""
    if name not in {"Edit", "Write"} or not isinstance(fields.get("path"), str):
        return None
    label = str(fields["path"])
    target = paths[0] if paths else Path(label)
    try:
        before = target.read_text(encoding="utf-8", errors="replace")
    except OSError:
        before = ""
    if name == "Write":
        after = str(fields.get("content", ""))
    else:
        old, new = str(fields.get("old_string", "")), str(fields.get("new_string", ""))
        if old and old in before:
            after = before.replace(old, new) if fields.get("replace_all") else before.replace(old, new, 1)
        else:  # the edit will fail; still show what was asked
            before, after = old, new
    new_file = name == "Write" and not target.exists()
    return list(
        difflib.unified_diff(
            before.splitlines(),
            after.splitlines(),
            fromfile="/dev/null" if new_file else f"a/{label}",
            tofile=f"b/{label}",
            lineterm="",
        )
    )


def print_diff(lines: list[str]) -> None:
    """A unified diff, coloured (removed red, added green, hunks cyan), cut after `MAX_DIFF_LINES`."""
    if not lines:
        err.print("  [dim](no change)[/dim]")
        return
    for line in lines[:MAX_DIFF_LINES]:
        if line.startswith(("+++", "---")):
            err.print(f"  [bold]{safe(line)}[/bold]")
        elif line.startswith("@@"):
            err.print(f"  [cyan]{safe(line)}[/cyan]")
        elif line.startswith("+"):
            err.print(f"  [green]{safe(line)}[/green]")
        elif line.startswith("-"):
            err.print(f"  [red]{safe(line)}[/red]")
        else:
            err.print(f"  {safe(line)}")
    if len(lines) > MAX_DIFF_LINES:
        err.print(f"  [dim]… {len(lines) - MAX_DIFF_LINES:,} more diff lines[/dim]")


def call_target(call: BoundCall) -> tuple[str | None, tuple[str, ...]]:
    """What rules look at in a call: its Bash command (None for other tools) and its paths."""
    command = getattr(call.input, "command", None) if call.name == "Bash" else None
    return (command if isinstance(command, str) else None), relative_paths(call.paths, call.context.cwd)


def unknown_tool_rules(permissions: Permissions, tools: Collection[str]) -> list[str]:
    """One line per config rule that names no tool of the session (a typo: it would never apply)."""
    lines = []
    for key, rules in (("allow", permissions.allow), ("deny", permissions.deny)):
        for rule in rules:
            if rule.tool not in tools and rule.origin != "this session":
                known = ", ".join(sorted(tools))
                lines.append(
                    f"{rule.origin}: permissions.{key}: {rule.text} names no tool of this session; it never applies"
                    f" (the tools: {known})"
                )
    return lines


class DenyRules(Rule):
    """The pre-tool-use rule that refuses, without asking, every call a deny rule covers.

    It also hides the files a deny rule covers from a Grep or Glob that meets them inside a folder.
    """

    def __init__(self, permissions: Permissions) -> None:
        self.permissions = permissions

    @property
    def name(self) -> str:
        return "permissions"

    async def check(self, call: BoundCall) -> Allow | Deny:
        command, paths = call_target(call)
        rule = self.permissions.denying(call.name, command, paths)
        if rule is None and call.named:  # a link named by a denied path is refused under that name too
            rule = self.permissions.denying(call.name, None, relative_paths(call.named, call.context.cwd))
        if rule is None:
            return Allow()
        why = refused_because(rule, command) if command is not None else None
        where = f" It could run {why}." if why is not None else ""
        return Deny(
            f"The deny rule {rule.text} (in {rule.origin}) refuses this call, without asking the user.{where} "
            "Do not look for another way to do the same; if it is needed, say so and ask the user."
        )

    def hides(self, call: BoundCall, path: Path) -> bool:
        return self.permissions.denying(call.name, None, relative_paths((path,), call.context.cwd)) is not None

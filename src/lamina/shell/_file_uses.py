"""Which files a command reads and which it writes, as far as the shell reader can see (pure).

Reads: the file operands of programs that read them (`cat`, `head`, `sed -n 1,40p`, `grep`, `wc`, …)
and `<file`. Writes: redirection targets and the operands of known writers (`tee`, `touch`, `cp`,
`mv`, `sed -i`, `git config`, …). A `cd` the reader can follow moves the folder later paths are
relative to. A program it does not know may read or write anything: it is not listed here.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from lamina.shell._syntax import CommandReading, SimpleCommand, Word

_SHOWN: Final = frozenset({"cat", "head", "tail", "less", "more", "bat", "nl", "tac"})
"""Programs that print their files' text (whole or a range)."""
_FACTS: Final = frozenset({"wc", "md5sum", "sha1sum", "sha256sum", "sha512sum", "cmp", "diff", "file", "stat"})
"""Programs that read their files and print facts about them, not their text."""
_VALUE_OPTIONS: Final = {
    "head": frozenset({"-n", "-c", "--lines", "--bytes"}),
    "tail": frozenset({"-n", "-c", "--lines", "--bytes", "-s", "--sleep-interval", "--pid"}),
    "bat": frozenset({"-l", "--language", "-r", "--line-range", "-H", "--highlight-line", "--style", "--theme"}),
    "nl": frozenset({"-b", "-d", "-f", "-h", "-i", "-l", "-n", "-s", "-v", "-w"}),
    "grep": frozenset({"-m", "-A", "-B", "-C", "-d", "-D", "--max-count", "--context", "--label"}),
    "diff": frozenset({"-C", "-U", "-I", "-x", "-X", "-F", "-L", "--label"}),
    "touch": frozenset({"-d", "-r", "-t", "--date", "--reference"}),
    "cp": frozenset({"-S", "--suffix"}),
    "mv": frozenset({"-S", "--suffix"}),
    "ln": frozenset({"-S", "--suffix"}),
    "install": frozenset({"-S", "--suffix", "-m", "--mode", "-o", "--owner", "-g", "--group"}),
    "mkdir": frozenset({"-m", "--mode"}),
    "truncate": frozenset({"-s", "--size", "-r", "--reference"}),
    "shred": frozenset({"-n", "--iterations", "-s", "--size", "--random-source"}),
}
_WRITERS: Final = frozenset({"tee", "touch", "rm", "rmdir", "mkdir", "unlink", "shred", "truncate"})
"""Programs that change every file operand."""
_COPIERS: Final = frozenset({"cp", "mv", "ln", "install"})
_MODE: Final = re.compile(r"[0-7]+|[ugoa]*([-+=][rwxXst]*)+(,[ugoa]*([-+=][rwxXst]*)+)*")
_SED_PRINT: Final = re.compile(r"\s*((\d+|\$)(\s*,\s*(\d+|\$|\+\d+|~\d+))?)?\s*p\s*")
"""A `sed -n` script that only prints a line range: `p`, `5p`, `1,40p`, `$p`, `10,+5p`."""
_WRAPPERS: Final = {
    "command": frozenset({"-p"}),
    "builtin": frozenset(),
    "exec": frozenset({"-c", "-l", "-a"}),
    "nohup": frozenset(),
    "time": frozenset({"-p"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}),
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"}),
    "doas": frozenset({"-u", "-C"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
}
"""Programs that run the rest of their words as a command, and their options that take a value."""
_GIT_VALUE_OPTIONS: Final = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"})
_GIT_CONFIG_READS: Final = frozenset(
    {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--get-color", "--get-colorbool", "-l", "--list"}
)
_GIT_CONFIG_WRITES: Final = frozenset(
    {"--add", "--unset", "--unset-all", "--replace-all", "--rename-section", "--remove-section", "-e", "--edit"}
)


@dataclass(frozen=True, slots=True)
class FileAccess:
    """One file a command reads or writes, as the command names it."""

    path: str
    """After quote removal, joined to the folder a `cd` moved to (relative to where the command starts,
    unless absolute or `~`)."""
    folder_known: bool = True
    """False after a `cd` the reader cannot follow: `path` is then as written, from a folder it cannot tell."""
    pattern: bool = False
    """`path` holds a glob, a brace expansion or a leading `~`: the shell decides the file."""
    shows_text: bool = False
    """For a read: the file's text reaches the output (`cat`, `sed -n 1,40p`), not only facts (`wc`)."""


@dataclass(frozen=True, slots=True)
class FileUses:
    """What a command reads and writes, as far as the reader can see."""

    reads: tuple[FileAccess, ...] = ()
    writes: tuple[FileAccess, ...] = ()
    only_reads: bool = False
    """Every simple command is a known reader that changes nothing (no `cd`, no redirection to a file,
    no assignment, no `awk`), and the reader understands the whole command."""


def file_uses(reading: CommandReading) -> FileUses:
    """The files `reading` reads and writes, in the order written.

    Args:
        reading: The command, read.

    Returns:
        Its reads and writes, and whether it only reads.
    """
    walk = _Walk()
    for command in reading.commands:
        walk.command(command)
    only = walk.only_reads and reading.understood and bool(reading.commands)
    return FileUses(tuple(walk.reads), tuple(walk.writes), only)


class _Walk:
    def __init__(self) -> None:
        self.folder: str | None = ""
        self.reads: list[FileAccess] = []
        self.writes: list[FileAccess] = []
        self.only_reads = True

    def access(self, word: Word, *, shows_text: bool = False) -> FileAccess | None:
        if word.value is None or not word.value:
            return None
        value = word.value
        absolute = value.startswith(("/", "~"))
        if self.folder is None and not absolute:
            return FileAccess(value, folder_known=False, pattern=word.pattern, shows_text=shows_text)
        path = value if absolute or not self.folder else posixpath.join(self.folder, value)
        return FileAccess(path, pattern=word.pattern, shows_text=shows_text)

    def read(self, words: Sequence[Word], *, shows_text: bool) -> None:
        for word in words:
            if (found := self.access(word, shows_text=shows_text)) is not None:
                self.reads.append(found)

    def write(self, words: Sequence[Word]) -> None:
        for word in words:
            if (found := self.access(word)) is not None:
                self.writes.append(found)

    def command(self, command: SimpleCommand) -> None:
        words = _unwrap(command.words)
        program = None if not words or words[0].value is None else posixpath.basename(words[0].value)
        if command.assignments or not words or len(words) != len(command.words) or command.nested:
            self.only_reads = False
        for redirect in command.redirects:
            self.only_reads = self.only_reads and redirect.harmless
            if redirect.written is not None:
                self.write([redirect.written])
            if redirect.read is not None:
                self.read([redirect.read], shows_text=program in _SHOWN)
        if program is None:
            self.only_reads = False
            return
        args = list(words[1:])
        if program in ("cd", "pushd", "popd"):
            self.only_reads = False
            self.folder = _moved(self.folder, program, args)
            return
        reader = _reads(self, program, args)
        self.only_reads = self.only_reads and reader
        _writes(self, program, args)


def _reads(walk: _Walk, program: str, args: list[Word]) -> bool:
    """Note the files `program` reads; whether it is a reader that changes nothing."""
    if program in _SHOWN or program in _FACTS:
        walk.read(_operands(args, _VALUE_OPTIONS.get(program, frozenset())), shows_text=program in _SHOWN)
        return True
    if program == "sed":
        files, prints, in_place = _sed(args)
        walk.read(files, shows_text=prints)
        if in_place:
            walk.write(files)
        return prints
    if program in ("grep", "egrep", "fgrep"):
        found = _grep(args)
        if found is None:
            return False
        walk.read(found, shows_text=True)
        return True
    if program == "awk":  # an awk program can run commands and write files: never only a read
        walk.read(_awk(args), shows_text=True)
    return False


def _writes(walk: _Walk, program: str, args: list[Word]) -> None:
    options = _VALUE_OPTIONS.get(program, frozenset())
    if program in _WRITERS:
        walk.write(_operands(args, options))
    elif program in _COPIERS:
        walk.write(_copied(program, args, options))
    elif program in ("chmod", "chown", "chgrp"):
        operands = _operands(args, frozenset())
        reference = any((arg.value or "").startswith("--reference") for arg in args)
        if program == "chmod":
            walk.write([word for word in operands if not _MODE.fullmatch(word.value or "")])
        else:
            walk.write(operands if reference else operands[1:])
    elif program == "dd":
        outputs = [(arg, arg.value) for arg in args if arg.value is not None and arg.value.startswith("of=")]
        walk.write([Word(arg.text, value[3:], arg.pattern) for arg, value in outputs])
    elif program == "git":
        walk.write(list(_git_config(args)))


def _unwrap(words: tuple[Word, ...]) -> tuple[Word, ...]:
    """The command a wrapper runs: `sudo -u x tee f` is `tee f`, `env A=1 nice -n 5 cp a b` is `cp a b`."""
    for _ in range(8):
        if not words or words[0].value is None:
            return words
        wrapper = posixpath.basename(words[0].value)
        if wrapper not in _WRAPPERS:
            return words
        options = _WRAPPERS[wrapper]
        i = 1
        while i < len(words):
            value = words[i].value or ""
            if value in options:
                i += 2
            elif value == "--":
                i += 1
                break
            elif value.startswith("-") or (wrapper in ("env", "sudo") and "=" in value):
                i += 1
            else:
                break
        if wrapper == "timeout" and i < len(words):
            i += 1  # the duration
        words = words[i:]
    return words


def _operands(args: Sequence[Word], value_options: frozenset[str]) -> list[Word]:
    """The words that are not options (nor an option's value); all of them after `--`."""
    found: list[Word] = []
    skip = done = False
    for arg in args:
        value = arg.value or ""
        if skip:
            skip = False
        elif done or value == "-" or not value.startswith("-"):
            found.append(arg)
        elif value == "--":
            done = True
        elif value in value_options:
            skip = True
    return found


def _moved(folder: str | None, program: str, args: list[Word]) -> str | None:
    operands = [arg for arg in args if not (arg.value or "").startswith("-")]
    if program == "popd" or folder is None or len(operands) != 1 or not operands[0].literal:
        return None
    target = operands[0].value or ""
    if target.startswith("/"):
        return posixpath.normpath(target)
    return posixpath.normpath(posixpath.join(folder, target)) if folder else posixpath.normpath(target)


def _copied(program: str, args: list[Word], options: frozenset[str]) -> list[Word]:
    """What `cp`, `mv`, `ln` and `install` write: the target (a file or a folder); for `mv` and `ln` the sources too."""
    target: Word | None = None
    words = iter(args)
    for arg in words:
        value = arg.value or ""
        if value in ("-t", "--target-directory"):
            target = next(words, None)
        elif value.startswith("--target-directory="):
            target = Word(arg.text, value.partition("=")[2], arg.pattern)
    operands = _operands([arg for arg in args if arg is not target], options | {"-t", "--target-directory"})
    if target is None and operands and (len(operands) > 1 or program != "ln"):
        target, operands = operands[-1], operands[:-1]
    elif target is None and operands:  # `ln -s ../x`: a link named like its target, here
        name = operands[0].value
        target = Word(operands[0].text, None if name is None else posixpath.basename(name), operands[0].pattern)
        operands = []
    # `mv` changes its sources too; writing through a link `ln` makes changes its target
    return ([] if target is None else [target]) + (operands if program in ("mv", "ln") else [])


def _sed(args: list[Word]) -> tuple[list[Word], bool, bool]:
    """The files `sed` reads, whether it only prints a line range (`-n 1,40p`), whether it edits in place."""
    options = _SedOptions()
    words = iter(args)
    for arg in words:
        options.take(arg, words)
    if not options.scripts and options.rest:
        options.scripts.append(options.rest.pop(0).value or "")
    plain = options.quiet and bool(options.scripts) and not (options.other or options.in_place)
    prints = plain and all(_SED_PRINT.fullmatch(script) for script in options.scripts)
    return options.rest, prints, options.in_place


class _SedOptions:
    """What `sed`'s words say: its scripts, its other words (the files), its options."""

    def __init__(self) -> None:
        self.quiet = self.in_place = self.other = False
        self.scripts: list[str] = []
        self.rest: list[Word] = []

    def take(self, arg: Word, words: Iterator[Word]) -> None:
        value = arg.value
        if value is None:
            self.other = True
        elif value in ("-n", "--quiet", "--silent"):
            self.quiet = True
        elif value in ("-e", "--expression"):
            script = next(words, None)
            self.scripts.append("" if script is None or script.value is None else script.value)
        elif value.startswith("--expression="):
            self.scripts.append(value.partition("=")[2])
        elif value.startswith("--in-place") or (value.startswith("-i") and not value.startswith("--")):
            self.in_place = True
        elif value.startswith("-") and value != "-":
            self.other = True  # -f reads a script, -s/-z/-E change what is printed; `-ni` edits in place
            self.in_place = self.in_place or (not value.startswith("--") and "i" in value)
        else:
            self.rest.append(arg)


def _grep(args: list[Word]) -> list[Word] | None:
    patterns_given = done = False
    rest: list[Word] = []
    words = iter(args)
    for arg in words:
        value = arg.value or ""
        if done or value == "-" or not value.startswith("-"):
            rest.append(arg)
        elif value == "--":
            done = True
        elif value in ("-e", "-f", "--regexp", "--file"):
            next(words, None)
            patterns_given = True
        elif value.startswith(("--regexp=", "--file=")):
            patterns_given = True
        elif value in _VALUE_OPTIONS["grep"]:
            next(words, None)
    if not patterns_given:
        if not rest:
            return None
        rest.pop(0)
    return rest


def _awk(args: list[Word]) -> list[Word]:
    program_given = False
    rest: list[Word] = []
    words = iter(args)
    for arg in words:
        value = arg.value or ""
        if value in ("-F", "-v"):
            next(words, None)
        elif value == "-f":
            next(words, None)
            program_given = True
        elif value.startswith("-") and value != "-" and not rest:
            continue  # -F: and -vx=1 written as one word
        else:
            rest.append(arg)
    if not program_given and rest:
        rest.pop(0)
    return [arg for arg in rest if "=" not in (arg.value or "")]  # `var=value` operands assign, they are not files


def _git_config(args: list[Word]) -> Iterator[Word]:
    """The config file `git config` writes, when it writes one: `git config core.pager less` writes `.git/config`."""
    folder, i = _git_options(args)
    if i >= len(args) or args[i].value != "config":
        return
    rest = [arg.value or "" for arg in args[i + 1 :]]
    options = {value.partition("=")[0] for value in rest if value.startswith("-")}
    if not _config_writes(rest, options):
        return
    if "--global" in options:
        yield Word("--global", "~/.gitconfig", pattern=True)
    elif "--system" in options:
        yield Word("--system", "/etc/gitconfig")
    elif options & {"-f", "--file"}:
        for j, value in enumerate(rest):
            if value.startswith("--file="):
                yield Word(value, value.partition("=")[2])
            elif value in ("-f", "--file") and j + 1 < len(rest):
                yield args[i + 2 + j]
    else:
        yield Word("config", posixpath.join(folder, ".git", "config"))


def _git_options(args: list[Word]) -> tuple[str, int]:
    """The folder `-C` moves git to, and where its subcommand is."""
    folder = ""
    i = 0
    while i < len(args) and (args[i].value or "").startswith("-"):
        value = args[i].value or ""
        if value == "-C" and i + 1 < len(args) and args[i + 1].value is not None:
            folder = posixpath.join(folder, args[i + 1].value or "")  # an unknown one: `.git/config` still shows
        if value in _GIT_VALUE_OPTIONS:
            i += 1
        i += 1
    return folder, i


def _config_writes(rest: list[str], options: set[str]) -> bool:
    """Whether `git config`'s words set something (`set`, `--add`, a name and a value), not only read."""
    positional = [value for value in rest if not value.startswith("-")]
    subcommand = positional[0] if positional else ""
    if subcommand in ("get", "list") or options & _GIT_CONFIG_READS:
        return False
    return (
        subcommand in ("set", "unset", "rename-section", "remove-section", "edit")
        or bool(options & _GIT_CONFIG_WRITES)
        or len(positional) >= 2
    )

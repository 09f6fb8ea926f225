"""Which files a command reads and writes, as far as the shell reader can see."""

from __future__ import annotations

import pytest

from lamina.shell import file_uses, read_command


def _reads(command: str) -> list[tuple[str, bool]]:
    return [(read.path, read.shows_text) for read in file_uses(read_command(command)).reads]


def _writes(command: str) -> list[str]:
    return [write.path for write in file_uses(read_command(command)).writes]


@pytest.mark.parametrize(
    ("command", "reads"),
    [
        ("cat a.md b.md", [("a.md", True), ("b.md", True)]),
        ("head -n 20 notes.txt 2>/dev/null", [("notes.txt", True)]),
        ("tail -f logs/app.log", [("logs/app.log", True)]),
        ("sed -n '1,40p' x.py", [("x.py", True)]),
        ("sed 's/a/b/' x.py", [("x.py", False)]),
        ("grep -n -e main -- src/a.py", [("src/a.py", True)]),
        ("awk -F: '{print $1}' /etc/passwd", [("/etc/passwd", True)]),
        ("wc -l a.py && md5sum b.py", [("a.py", False), ("b.py", False)]),
        ("cat < in.txt", [("in.txt", True)]),
        ("sudo -u me cat secret", [("secret", True)]),
        ("cd src && cat a.py && cd ../docs && head b.md", [("src/a.py", True), ("docs/b.md", True)]),
        ("echo hi; python x.py", []),
    ],
)
def test_reads(command: str, reads: list[tuple[str, bool]]) -> None:
    assert _reads(command) == reads


def test_a_cd_the_reader_cannot_follow_leaves_later_paths_from_an_unknown_folder() -> None:
    uses = file_uses(read_command("cd $DIR && cat a.py /etc/hosts"))
    assert [(read.path, read.folder_known) for read in uses.reads] == [("a.py", False), ("/etc/hosts", True)]


@pytest.mark.parametrize(
    ("command", "writes"),
    [
        ("ls > out.txt 2>>err.log", ["out.txt", "err.log"]),
        ("ls &>all.log >&both.log 2>&1 >/dev/null", ["all.log", "both.log"]),
        ("{ echo a; echo b; } > .git/config", [".git/config", ".git/config"]),
        ("echo x | tee -a a.txt b.txt", ["a.txt", "b.txt"]),
        ("touch -d yesterday stamp", ["stamp"]),
        ("cp -r a b dest/", ["dest/"]),
        ("cp -t .git/hooks evil", [".git/hooks"]),
        ("mv old new", ["new", "old"]),
        ("ln -s ../hook .git/hooks/pre-commit", [".git/hooks/pre-commit", "../hook"]),
        ("rm -rf build dist", ["build", "dist"]),
        ("mkdir -p -m 755 a/b", ["a/b"]),
        ("chmod +x .git/hooks/pre-commit run.sh", [".git/hooks/pre-commit", "run.sh"]),
        ("chmod -x run.sh", ["run.sh"]),
        ("chown me:me f", ["f"]),
        ("sed -i.bak 's/a/b/' conf.ini", ["conf.ini"]),
        ("dd if=/dev/zero of=disk.img count=1", ["disk.img"]),
        ("truncate -s 0 log", ["log"]),
        ("git config core.fsmonitor 'touch C'", [".git/config"]),
        ("git -C sub config --add core.hooksPath h", ["sub/.git/config"]),
        ("git config --global alias.x '!rm x'", ["~/.gitconfig"]),
        ("git config --file=cfg a.b c", ["cfg"]),
        ("git config set core.pager less", [".git/config"]),
        ("git config core.pager", []),
        ("git config --get core.pager", []),
        ("git config list", []),
        ("env A=1 nice -n 5 tee log", ["log"]),
        ("cd .git && echo x > config", [".git/config"]),
        ('python -c \'open("f", "w")\'', []),
    ],
)
def test_writes(command: str, writes: list[str]) -> None:
    assert _writes(command) == writes


@pytest.mark.parametrize(
    ("command", "only"),
    [
        ("cat a.md", True),
        ("cat a.md | head -n 3 && wc -l b.md", True),
        ("sed -n '1,40p' x.py", True),
        ("grep -n x a.py 2>/dev/null", True),
        ("cat a.md && touch pwned", False),
        ("cat a.md > pwned", False),
        ("cat a.md $(touch pwned)", False),
        ("awk '{print}' a.md", False),
        ("cd src && cat a.md", False),
        ("X=1 cat a.md", False),
        ("sed -n '1p;w out' a.md", False),
        ("sudo cat a.md", False),
    ],
)
def test_only_reads(command: str, only: bool) -> None:
    assert file_uses(read_command(command)).only_reads is only

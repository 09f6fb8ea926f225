"""Lamina's one glob dialect (wcmatch's): what patterns match, the literal prefix Glob walks from, errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lamina.workspace import GlobError, compile_glob, split_glob


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        ("*.py", ["a.py", ".hidden.py"], ["sub/a.py", "a.pyc"]),
        ("**/*.py", ["a.py", "x/a.py", "x/y/z/a.py", ".git/x.py"], ["a.pyc", "x/a.txt"]),
        ("src/**", ["src/a", "src/x/y"], ["other/a"]),
        ("src/**/test_*.py", ["src/test_a.py", "src/x/test_b.py"], ["test_a.py", "src/x/b_test.py"]),
        ("?.txt", ["a.txt"], ["ab.txt", "/.txt"]),
        ("[ab].txt", ["a.txt", "b.txt"], ["c.txt"]),
        ("[!ab].txt", ["c.txt"], ["a.txt", "/.txt"]),
        ("*.{ts,tsx}", ["a.ts", "a.tsx"], ["a.js", "a.t"]),
        ("{src,lib}/**/*.{c,h}", ["src/a.c", "lib/x/b.h"], ["test/a.c"]),
        ("part{1..3}.txt", ["part1.txt", "part3.txt"], ["part4.txt"]),
        ("{x}.py", ["{x}.py"], ["x.py"]),
        ("a\\*.py", ["a*.py"], ["ab.py"]),
        ("[unclosed.py", ["[unclosed.py"], ["u.py"]),
        # a `]` first in a class is a member, as in bash: the class is `]` or `a`
        ("[]a]", ["]", "a"], ["b", "[]a]"]),
        ("[!]]", ["a", "b"], ["]"]),
        ("[[:alpha:]].md", ["a.md", "Z.md"], ["1.md", "[.md", ":.md"]),
        ("[[:digit:]]*", ["1x", "9"], ["x1"]),
    ],
)
def test_glob_semantics(pattern: str, matches: list[str], misses: list[str]) -> None:
    glob = compile_glob(pattern)
    for path in matches:
        assert glob.matches(path), (pattern, path)
    for path in misses:
        assert not glob.matches(path), (pattern, path)


SPLITS = {
    "src/**/*.py": ("src", "**/*.py"),
    "**/*.py": ("", "**/*.py"),
    "a/b/c.py": ("a/b", "c.py"),
    "c.py": ("", "c.py"),
    "/abs/dir/*.txt": ("/abs/dir", "*.txt"),
    "/*.txt": ("/", "*.txt"),
    "src/{a,b}/x.py": ("src", "{a,b}/x.py"),
}
"""Pattern → (the literal folders Glob walks from, the rest it matches)."""


@pytest.mark.parametrize("pattern", sorted(SPLITS))
def test_split_glob_keeps_the_literal_leading_folders(pattern: str) -> None:
    assert split_glob(pattern) == SPLITS[pattern]


def test_too_many_brace_alternatives_are_refused() -> None:
    with pytest.raises(GlobError, match="more than 1,000 alternatives"):
        compile_glob("{a,b,c,d}{a,b,c,d}{a,b,c,d}{a,b,c,d}{a,b,c,d}")


def test_a_range_too_long_to_expand_is_refused() -> None:
    with pytest.raises(GlobError, match="alternatives"):
        compile_glob("{1..100000}")


segment = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="/*?[]{}\\\0!"), min_size=1)


@pytest.mark.slow
@given(st.lists(segment, min_size=1, max_size=4))
def test_a_literal_path_matches_itself_and_double_star_finds_it_at_any_depth(parts: list[str]) -> None:
    path = "/".join(parts)
    assert compile_glob(path).matches(path)
    assert compile_glob("**/" + parts[-1]).matches(path)
    assert compile_glob("**").matches(path)


@given(st.text(alphabet=st.sampled_from("ab/*?[]{}!^,.-:\\0"), max_size=24), st.text(max_size=12))
def test_any_pattern_compiles_or_raises_glob_error(pattern: str, path: str) -> None:
    try:
        glob = compile_glob(pattern)
    except GlobError as exc:
        assert pattern in str(exc)
        return
    assert glob.matches(path) in (True, False)

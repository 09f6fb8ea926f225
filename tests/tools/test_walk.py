"""Glob patterns and the literal prefix that Glob walks from."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lamina.tools._search_files import compile_glob, split_glob


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        ("*.py", ["a.py", ".hidden.py"], ["sub/a.py", "a.pyc"]),
        ("**/*.py", ["a.py", "x/a.py", "x/y/z/a.py"], ["a.pyc", "x/a.txt"]),
        ("src/**", ["src/a", "src/x/y"], ["other/a"]),
        ("src/**/test_*.py", ["src/test_a.py", "src/x/test_b.py"], ["test_a.py", "src/x/b_test.py"]),
        ("?.txt", ["a.txt"], ["ab.txt", "/.txt"]),
        ("[ab].txt", ["a.txt", "b.txt"], ["c.txt"]),
        ("[!ab].txt", ["c.txt"], ["a.txt", "/.txt"]),
        ("*.{ts,tsx}", ["a.ts", "a.tsx"], ["a.js", "a.t"]),
        ("{src,lib}/**/*.{c,h}", ["src/a.c", "lib/x/b.h"], ["test/a.c"]),
        ("{x}.py", ["{x}.py"], ["x.py"]),
        ("a\\*.py", ["a*.py"], ["ab.py"]),
        ("[unclosed.py", ["[unclosed.py"], ["u.py"]),
    ],
)
def test_glob_semantics(pattern: str, matches: list[str], misses: list[str]) -> None:
    regex = compile_glob(pattern)
    for path in matches:
        assert regex.fullmatch(path), (pattern, path)
    for path in misses:
        assert not regex.fullmatch(path), (pattern, path)


@pytest.mark.parametrize(
    ("pattern", "prefix", "rest"),
    [
        ("src/**/*.py", "src", "**/*.py"),
        ("**/*.py", "", "**/*.py"),
        ("a/b/c.py", "a/b", "c.py"),
        ("c.py", "", "c.py"),
        ("/abs/dir/*.txt", "/abs/dir", "*.txt"),
        ("/*.txt", "/", "*.txt"),
        ("src/{a,b}/x.py", "src", "{a,b}/x.py"),
    ],
)
def test_split_glob_keeps_the_literal_leading_folders(pattern: str, prefix: str, rest: str) -> None:
    assert split_glob(pattern) == (prefix, rest)


def test_too_many_brace_alternatives_are_refused() -> None:
    with pytest.raises(ValueError, match="alternatives"):
        compile_glob("{a,b,c,d}{a,b,c,d}{a,b,c,d}{a,b,c,d}{a,b,c,d}")


segment = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="/*?[]{}\\\0"), min_size=1)


@pytest.mark.slow
@given(st.lists(segment, min_size=1, max_size=4))
def test_a_literal_path_matches_itself_and_double_star_finds_it_at_any_depth(parts: list[str]) -> None:
    path = "/".join(parts)
    assert compile_glob(path).fullmatch(path)
    assert compile_glob("**/" + parts[-1]).fullmatch(path)
    assert compile_glob("**").fullmatch(path)

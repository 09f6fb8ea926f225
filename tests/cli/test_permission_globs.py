"""Path rules read their globs in Lamina's one dialect: classes and braces as in bash, a bad glob one clear error."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lamina.cli._permissions import Permissions, parse_rule, read_rules
from lamina.errors import ConfigError


@pytest.mark.parametrize(
    ("glob", "matches", "misses"),
    [
        ("[]a]", ["]", "x/a"], ["b", "[]a]"]),
        ("[!]]", ["a", "x/b"], ["]"]),
        ("[[:alpha:]].py", ["a.py", "x/Z.py"], ["1.py", ":.py"]),
        ("src/*.{py,pyi}", ["src/a.py", "src/a.pyi"], ["src/a.txt", "src/x/a.py"]),
        ("docs/", ["docs/a.md", "docs/x/y.md"], ["docs", "other/a.md"]),
        ("./src/**", ["src/a", "src/x/y"], ["a"]),
    ],
)
def test_a_path_rule_matches_as_a_glob_does(glob: str, matches: list[str], misses: list[str]) -> None:
    rule = parse_rule(f"Edit({glob})")
    for path in matches:
        assert rule.matches("Edit", None, (path,)), (glob, path)
    for path in misses:
        assert not rule.matches("Edit", None, (path,)), (glob, path)


def test_a_glob_that_cannot_be_used_is_one_config_error_naming_the_file_and_rule() -> None:
    with pytest.raises(ConfigError, match=r"config.toml: permissions.deny\[0\]: .*more than 1,000 alternatives"):
        read_rules([("config.toml", (), ("Read({1..100000})",))])


_GLOB = st.text(alphabet=st.sampled_from("ab]/*?[{},.!^:-\\1"), min_size=1, max_size=20) | st.text(min_size=1)


@given(glob=_GLOB, path=st.text(max_size=16))
def test_any_path_rule_parses_to_a_matcher_or_a_config_error(glob: str, path: str) -> None:
    try:
        rule = parse_rule(f"Read({glob})")
    except ConfigError:
        return
    permissions = Permissions(allow=(rule,), deny=(rule,))
    assert permissions.denying("Read", None, (path,)) in (None, rule)
    assert permissions.allowing("Grep", None, (path,)) in ((), (rule,))

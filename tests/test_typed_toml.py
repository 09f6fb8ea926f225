"""Settings files as msgspec Structs (`lamina._typed_toml`): one error naming the file, the key and what it may be."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import msgspec
import pytest
from hypothesis import given

from lamina._typed_toml import TomlProblem, convert_table, read_config_file, read_toml
from lamina.errors import ConfigError
from tests.support.toml_text import Toml, toml_document, toml_documents


class _Inner(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    network: bool | None = None
    level: Literal["low", "high"] = "low"


class _Settings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    model: str | None = None
    window: int | None = None
    paths: list[str] = msgspec.field(default_factory=list)
    sandbox: _Inner | None = None


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('modle = "x"', "modle: unknown field 'modle' (did you mean 'model'?); the fields are model, window, paths"),
        ("[sandbox]\nnetwrk = true", "sandbox.netwrk: unknown field 'netwrk' (did you mean 'network'?)"),
        ('[sandbox]\nlevel = "max"', "sandbox.level: invalid enum value 'max'; allowed: 'high', 'low'"),
        ('window = "big"', "window: must be an integer, not a string"),
        ("paths = [1]", "paths[0]: must be a string, not an integer"),
        ('[sandbox]\nnetwork = "yes"', "sandbox.network: must be true or false, not a string"),
        ("model = ", "not valid TOML"),
    ],
)
def test_a_file_that_does_not_fit_names_the_key_and_what_it_may_be(text: str, said: str) -> None:
    with pytest.raises(TomlProblem) as caught:
        read_toml(text, _Settings)
    assert str(caught.value).startswith(said)


def test_a_config_file_names_itself_in_the_error_and_a_missing_one_is_none(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    assert read_config_file(path, _Settings) is None
    path.write_text('window = 100\nmodel = "m"\n')
    assert read_config_file(path, _Settings) == _Settings(model="m", window=100)
    path.write_text("windw = 1\n")
    with pytest.raises(ConfigError, match=rf"^{path}: windw: unknown field 'windw' \(did you mean 'window'\?\)"):
        read_config_file(path, _Settings)


class _Endpoint(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: str
    method: Literal["GET", "POST"] = "GET"


class _Tables(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    notes: dict[str, Annotated[str, msgspec.Meta(description="a note (a string)")]] = msgspec.field(
        default_factory=dict
    )
    endpoints: dict[str, _Endpoint] | None = None
    timeout: Annotated[float, msgspec.Meta(gt=0, description="a positive number of seconds")] = 60.0


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[notes]\nok = "x"\n"src/" = 1', "notes.src/: must be a note (a string), not an integer"),
        ('[endpoints.get]\nname = "g"\nmethd = "GET"', "endpoints.get.methd: unknown field 'methd' (did you mean"),
        ('[endpoints.get]\nname = "g"\nmethod = "PUT"', "endpoints.get.method: invalid enum value 'PUT'; allowed: "),
        ('[endpoints.get]\nname = "g"\nmethod = 1', "endpoints.get.method: must be one of 'GET', 'POST', not an"),
        ("[endpoints.get]\n", "endpoints.get.name: is required"),
        ("timeout = -1", "timeout: must be a positive number of seconds, not -1"),
    ],
)
def test_the_key_inside_a_table_of_values_is_named_and_a_fields_description_says_what_it_may_be(
    text: str, said: str
) -> None:
    with pytest.raises(TomlProblem) as caught:
        read_toml(text, _Tables)
    assert str(caught.value).startswith(said)


def test_a_sub_table_converted_on_its_own_names_its_keys_relative_to_it() -> None:
    with pytest.raises(TomlProblem) as caught:
        convert_table({"name": "g", "method": "PUT"}, _Endpoint)
    assert (caught.value.key, caught.value.problem) == ("method", "invalid enum value 'PUT'; allowed: 'GET', 'POST'")


@given(document=toml_documents(["notes", "endpoints", "timeout", "name", "method", "paths", "sandbox", "level"]))
def test_any_toml_table_fits_or_is_one_toml_problem_naming_a_key(document: dict[str, Toml]) -> None:
    for into in (_Settings, _Tables):
        try:
            read_toml(toml_document(document), into)
        except TomlProblem as exc:  # the only error
            fields = [field.encode_name for field in msgspec.structs.fields(into)]
            keys = {*fields, *document}
            assert exc.key in keys or str(exc.key).startswith(tuple(f"{key}{then}" for key in keys for then in ".["))

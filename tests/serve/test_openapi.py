"""Property test of the JSON API against its own OpenAPI document (schemathesis, hypothesis underneath)."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.specs.openapi.schemas import OpenApiSchema

from lamina.pricing import cost_of
from lamina.serve import create_app
from tests.conftest import EXHAUSTIVE
from tests.serve.conftest import Stored


@pytest.fixture(scope="module")
def api_schema(stored: Stored) -> OpenApiSchema:
    app = create_app(
        stored.store, extra_hosts=("testserver",), prices=cost_of
    )  # the name schemathesis's ASGI client sends
    return schemathesis.openapi.from_asgi("/api/openapi.json", app)


OPERATIONS = (
    "/api/sessions",
    "/api/sessions/{session_id}",
    "/api/sessions/{session_id}/entries",
    "/api/sessions/{session_id}/entries/{entry_id}",
    "/api/sessions/{session_id}/requests",
    "/api/sessions/{session_id}/requests/{index}",
)


def test_every_api_route_is_in_the_schema(api_schema: OpenApiSchema) -> None:
    assert sorted(api_schema.raw_schema["paths"]) == sorted(OPERATIONS)


@pytest.mark.parametrize("path", OPERATIONS)
@settings(
    max_examples=1_000 if EXHAUSTIVE else 25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@pytest.mark.slow
@given(data=st.data())
def test_api_answers_as_its_schema_says(api_schema: OpenApiSchema, path: str, data: st.DataObject) -> None:
    """Any parameters schemathesis generates: a documented status (200, 400, 404) and a body that matches the
    document, never a server error."""
    case = data.draw(api_schema[path]["GET"].as_strategy())
    case.call_and_validate()


@pytest.mark.parametrize(
    ("path", "parameters"),
    [
        ("/api/sessions", {}),
        ("/api/sessions/{session_id}", {"session_id": "rich"}),
        ("/api/sessions/{session_id}/entries", {"session_id": "rich"}),
        ("/api/sessions/{session_id}/entries", {"session_id": "hostile"}),
        ("/api/sessions/{session_id}/requests", {"session_id": "rich"}),
        ("/api/sessions/{session_id}/requests/{index}", {"session_id": "rich", "index": 3}),
    ],
)
def test_real_sessions_match_the_schema(
    api_schema: OpenApiSchema, stored: Stored, path: str, parameters: dict[str, object]
) -> None:
    ids = {"rich": stored.rich.id, "hostile": stored.hostile}
    resolved = {k: ids.get(str(v), v) for k, v in parameters.items()}
    case = api_schema[path]["GET"].Case(path_parameters=resolved)
    response = case.call_and_validate()
    assert response.status_code == 200

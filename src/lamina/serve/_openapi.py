"""The OpenAPI document of the inspector's JSON API, generated from the same types the API encodes (pure)."""

from __future__ import annotations

from typing import Any, Final

import msgspec

from lamina.serve._model import EntryPage, ErrorOut, Item, RequestLayers, RequestSeries, SessionDetail, SessionList

MAX_LIMIT: Final = 1_000
"""The most entries one page of `/api/sessions/{id}/entries` returns."""


def _param(
    name: str, where: str, schema: dict[str, Any], description: str, *, required: bool = False
) -> dict[str, Any]:
    return {"name": name, "in": where, "required": required, "schema": schema, "description": description}


_SESSION = _param("session_id", "path", {"type": "string"}, "The session id.", required=True)
_LEAF = _param(
    "leaf", "query", {"type": "string"}, "Show the branch ending at this entry (default: the session's leaf)."
)


_SCHEMES = {
    "bearer": {"type": "http", "scheme": "bearer", "description": "The token `lamina serve` printed."},
    "query": {"type": "apiKey", "in": "query", "name": "token", "description": "The same token in the address."},
}


def openapi_document(version: str, *, token_required: bool = False) -> dict[str, Any]:
    """The OpenAPI 3.1 document of every `/api/` route; with `token_required`, how the token is sent."""
    types = (SessionList, SessionDetail, EntryPage, Item, RequestSeries, RequestLayers, ErrorOut)
    schemas, components = msgspec.json.schema_components(types, ref_template="#/components/schemas/{name}")
    body = dict(zip(("list", "detail", "page", "item", "series", "layers", "error"), schemas, strict=True))

    def ok(kind: str, description: str) -> dict[str, Any]:
        error = {"content": {"application/json": {"schema": body["error"]}}}
        return {
            "200": {"description": description, "content": {"application/json": {"schema": body[kind]}}},
            "400": {"description": "A parameter is not valid.", **error},
            "404": {"description": "No such session, branch, entry or request.", **error},
            **({"401": {"description": "The token is missing or wrong.", **error}} if token_required else {}),
        }

    def get(operation: str, summary: str, params: list[dict[str, Any]], kind: str, description: str) -> dict[str, Any]:
        responses = ok(kind, description)
        if kind == "layers":
            error = {"content": {"application/json": {"schema": body["error"]}}}
            responses["422"] = {"description": "The request cannot be rebuilt from the log (damage in it).", **error}
        return {
            "get": {
                "operationId": operation,
                "summary": summary,
                "parameters": params,
                "responses": responses,
            }
        }

    paths = {
        "/api/sessions": get(
            "listSessions",
            "Every session of the store, newest first, with totals.",
            [_param("q", "query", {"type": "string"}, "Keep sessions whose id, title or workspace holds this text.")],
            "list",
            "The sessions.",
        ),
        "/api/sessions/{session_id}": get(
            "getSession",
            "A session: its branches, the compactions and plans of the shown branch, problems found reading it.",
            [_SESSION, _LEAF],
            "detail",
            "The session.",
        ),
        "/api/sessions/{session_id}/entries": get(
            "listEntries",
            "A page of the timeline of one branch, root first (texts cut to a bound).",
            [
                _SESSION,
                _LEAF,
                _param("offset", "query", {"type": "integer", "minimum": 0}, "The first entry of the page."),
                _param(
                    "limit", "query", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}, "Entries on the page."
                ),
            ],
            "page",
            "The entries.",
        ),
        "/api/sessions/{session_id}/entries/{entry_id}": get(
            "getEntry",
            "One entry with its whole text.",
            [_SESSION, _param("entry_id", "path", {"type": "string"}, "The entry id.", required=True)],
            "item",
            "The entry.",
        ),
        "/api/sessions/{session_id}/requests": get(
            "listRequests",
            "Every request (model call) of the session: tokens per layer, cache figures from the provider and the "
            "simulator.",
            [_SESSION, _LEAF],
            "series",
            "The requests.",
        ),
        "/api/sessions/{session_id}/requests/{index}": get(
            "getRequest",
            "One request as sent: its layers, blocks, breakpoints and cache figures side by side.",
            [
                _SESSION,
                _param("index", "path", {"type": "integer", "minimum": 0}, "The request's index.", required=True),
            ],
            "layers",
            "The request.",
        ),
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Lamina session inspector",
            "version": version,
            "description": "Read-only JSON API over a Lamina session store.",
        },
        "paths": paths,
        "components": {"schemas": components, **({"securitySchemes": _SCHEMES} if token_required else {})},
        **({"security": [{"bearer": []}, {"query": []}]} if token_required else {}),
    }

"""The session inspector behind `lamina serve`: a read-only web application over the session store.

`create_app(store)` returns the Starlette application: the sessions list, one session's timeline
with its branches, compactions and plans, each request's layers and cache figures (rebuilt from
the log and replayed through the cache simulator, beside the provider's usage), a JSON API under
`/api/` described by `/api/openapi.json`, and live updates by server-sent events.
"""

from __future__ import annotations

from lamina.serve._security import needs_token
from lamina.serve._web_app import create_app

__all__ = ["create_app", "needs_token"]

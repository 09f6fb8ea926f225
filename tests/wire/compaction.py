"""Server compaction on the wire server: Anthropic's standalone `compaction` request and block, OpenAI's compact.

Anthropic (beta `compact-2026-09-04`, `BetaCompactionConfigParam`): a `/v1/messages` body with
`compaction: {"type": "summarize"}` is answered with one signed `compaction` block alone
(`stop_reason: "compaction"`). A block sent back is checked as the API checks it, each refusal a
400 whose `error.details.error_code` the SDK maps to its `Compaction*Error`:
`compaction_block_ambiguous` (more than one block with content), `compaction_block_misplaced`
(not the first block of the conversation, or in `system`), `compaction_signature_invalid`,
`compaction_content_mismatch` (the content differs from what the signature recorded),
`compaction_tool_changes_mismatch`; a compaction request with nothing to summarise or ending on an
unfinished assistant turn is refused too, and `Compact(unavailable=True)` answers 529
`compaction_unavailable` (retry). The inline `compact_20260112` edit is not implemented: Lamina
does not send it (docs/compaction.md, "Server compaction", says why).

OpenAI (`POST /v1/responses/compact`, `CompactedResponse`): the input's user messages, then one
`compaction` item whose `encrypted_content` is sealed with the server's secret; a compaction item
sent back to `/v1/responses` or `/v1/responses/compact` that does not verify is refused (400
`invalid_encrypted_content`, the wording of a reasoning item's).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from tests.wire import anthropic_api, openai_api
from tests.wire.script import WireResponse, json_response

COMPACT_BETA: Final = "compact-2026-09-04"
_DIGEST: Final = 16
_NONCE: Final = 8
_MAC: Final = hashlib.sha256().digest_size


@dataclass(frozen=True)
class Compact:
    """A scripted answer to the next compaction request (`WireServer.compactions`; none queued: the server's own)."""

    content: str | None = "The conversation so far, summarised by the server."
    """The summary; None: a failed compaction (`content: null`)."""
    unavailable: bool = False
    """Answer 529 `compaction_unavailable` (a transient failure: retry)."""
    user_messages: Sequence[str] | None = None
    """OpenAI: the user messages the output lists (None: the input's own, verbatim)."""


# --- Anthropic ------------------------------------------------------------------------------------


def _digest(value: object) -> bytes:
    return hashlib.sha256(msgspec.json.encode(value)).digest()[:_DIGEST]


class CompactionSigner:
    """The server's key for `compaction` blocks: signs the content and tool changes it returns, checks them back."""

    def __init__(self) -> None:
        self._secret = secrets.token_bytes(32)

    def block(self, content: str | None, n: int) -> dict[str, Any]:
        """A signed `compaction` block for `content` (response `n`); its tool changes are `[]`."""
        changes: list[object] = []
        recorded = n.to_bytes(_NONCE, "big") + _digest(content) + _digest(changes)
        signature = base64.b64encode(recorded + self._mac(recorded)).decode()
        opaque = base64.b64encode(self._mac(b"encrypted" + recorded)).decode()
        return {
            "type": "compaction",
            "content": content,
            "encrypted_content": opaque,
            "signature": signature,
            "tool_changes": changes,
        }

    def problem(self, body: Mapping[str, Any]) -> tuple[str, str] | None:
        """The API's refusal of the compaction blocks `body` sends, as (error code, message), or None."""
        system = body.get("system")
        if isinstance(system, list) and any(_is_block(b) for b in system):
            return "compaction_block_misplaced", _MISPLACED
        messages = body.get("messages")
        found = [
            (i, j, b)
            for i, m in enumerate(messages if isinstance(messages, list) else ())
            for j, b in enumerate(_blocks(m))
            if _is_block(b)
        ]
        if sum(1 for *_, b in found if b.get("content") is not None) > 1:
            return "compaction_block_ambiguous", _AMBIGUOUS
        for i, j, block in found:
            if (i, j) != (0, 0):
                return "compaction_block_misplaced", _MISPLACED
            return self._check(block, f"messages.{i}.content.{j}")
        return None

    def _check(self, block: Mapping[str, Any], where: str) -> tuple[str, str] | None:
        signature = block.get("signature")
        raw = _unb64(signature) if isinstance(signature, str) else None
        if raw is None or len(raw) != _NONCE + 2 * _DIGEST + _MAC:
            return "compaction_signature_invalid", f"{where}: {_SIGNATURE}"
        recorded, mac = raw[:-_MAC], raw[-_MAC:]
        if not hmac.compare_digest(mac, self._mac(recorded)):
            return "compaction_signature_invalid", f"{where}: {_SIGNATURE}"
        content_digest, changes_digest = recorded[_NONCE : _NONCE + _DIGEST], recorded[_NONCE + _DIGEST :]
        if _digest(block.get("content")) != content_digest:
            return "compaction_content_mismatch", f"{where}: {_MISMATCH}"
        if _digest(block.get("tool_changes") or []) != changes_digest:
            return "compaction_tool_changes_mismatch", f"{where}: {_CHANGES}"
        return None

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._secret, b"compaction\0" + payload, hashlib.sha256).digest()


_MISPLACED: Final = (
    "A `compaction` block must be the first block of the conversation and cannot appear in a `system` message."
)
_AMBIGUOUS: Final = (
    "`messages` holds more than one `compaction` block with content. Send only the block the conversation "
    "returned last."
)
_SIGNATURE: Final = "The `compaction` block's `signature` does not verify."
_MISMATCH: Final = "The `compaction` block's `content` differs from the text its `signature` recorded."
_CHANGES: Final = "The `compaction` block's `tool_changes` differs from what was returned with the block."
_UNAVAILABLE: Final = "The compaction could not be completed for a transient server reason. Retry the request."


def anthropic_error(status: int, error_type: str, code: str, message: str, n: int) -> WireResponse:
    """An Anthropic error whose `error.details.error_code` names the cause (`anthropic.APIStatusError.error_code`)."""
    error = {"type": error_type, "message": message, "details": {"error_code": code}}
    return json_response(status, {"type": "error", "error": error, "request_id": f"req_wire_{n:04d}"})


def summarize_problem(body: Mapping[str, Any], headers: Mapping[str, str], n: int) -> WireResponse | None:
    """Why the API refuses a standalone compaction request before summarising, or None."""
    betas = {b.strip() for b in headers.get("anthropic-beta", "").split(",")}
    if COMPACT_BETA not in betas:
        message = f"compaction: this parameter requires the `anthropic-beta: {COMPACT_BETA}` header"
        return anthropic_api.error(400, "invalid_request_error", message, n)
    if body.get("context_management") is not None:
        message = "`compaction` cannot be combined with `context_management`."
        return anthropic_api.error(400, "invalid_request_error", message, n)
    messages = [m for m in body.get("messages") or () if isinstance(m, Mapping)]
    if not any(_has_content(m) for m in messages):
        text = "`messages` holds no `user` or `assistant` content to summarize or adopt."
        return anthropic_error(400, "invalid_request_error", "compaction_nothing_to_summarize", text, n)
    last = _blocks(messages[-1])
    if messages[-1].get("role") == "assistant" and last and last[-1].get("type") == "tool_use":
        text = "The compaction request ends on an `assistant` turn that is not finished."
        return anthropic_error(400, "invalid_request_error", "compaction_incomplete_turn", text, n)
    return None


def summarize_reply(
    body: Mapping[str, Any], step: Compact | None, signer: CompactionSigner, n: int, *, input_tokens: int
) -> WireResponse:
    """The response to a standalone compaction request: the signed block alone, `stop_reason: "compaction"`."""
    if step is not None and step.unavailable:
        return anthropic_error(529, "overloaded_error", "compaction_unavailable", _UNAVAILABLE, n)
    content = step.content if step is not None else _summary_of(body.get("messages") or ())
    output = max(1, len(content or "") // 4)
    message = {
        "id": f"msg_wire_{n:04d}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": [signer.block(content, n)],
        "stop_reason": "compaction",
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output, "service_tier": "standard"},
    }
    return json_response(200, message)


def _summary_of(messages: Sequence[object]) -> str:
    """The server's own summary: how many messages it read and the start of each user text."""
    starts = [t[:80] for m in messages if _role(m) == "user" for t in _texts(m)]
    return f"Summary of {len(messages)} messages. The user asked: " + " | ".join(starts)


def _texts(message: object) -> list[str]:
    content = message.get("content") if isinstance(message, Mapping) else None
    if isinstance(content, str):
        return [content]
    return [str(b.get("text")) for b in _blocks(message) if b.get("type") in ("text", "input_text")]


def _has_content(message: Mapping[str, Any]) -> bool:
    return message.get("role") in ("user", "assistant") and any(
        b.get("type") != "compaction" or b.get("content") is not None for b in _blocks(message)
    )


def _is_block(block: object) -> bool:
    return isinstance(block, Mapping) and block.get("type") == "compaction"


def _blocks(message: object) -> Sequence[Mapping[str, Any]]:
    content = message.get("content") if isinstance(message, Mapping) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def _role(message: object) -> object:
    return message.get("role") if isinstance(message, Mapping) else None


def _unb64(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


# --- OpenAI ---------------------------------------------------------------------------------------

COMPACT_PATH: Final = "/v1/responses/compact"


def item_problem(body: Mapping[str, Any], *, secret: bytes) -> WireResponse | None:
    """The API's refusal of a `compaction` input item that does not verify (400 `invalid_encrypted_content`)."""
    items = body.get("input")
    for item in items if isinstance(items, list) else ():
        if isinstance(item, Mapping) and item.get("type") == "compaction":
            sealed = item.get("encrypted_content")
            if not isinstance(sealed, str) or openai_api.unseal(secret, sealed) is None:
                message = (
                    f"The encrypted content for item {item.get('id')} could not be verified. "
                    "Reason: Encrypted content could not be decrypted or parsed."
                )
                return openai_api.error(400, "invalid_request_error", message, code="invalid_encrypted_content")
    return None


def compact_reply(body: Mapping[str, Any], step: Compact | None, n: int, *, secret: bytes, t: float) -> WireResponse:
    """`POST /v1/responses/compact`: the input's user messages, then one sealed `compaction` item."""
    if not isinstance(body.get("model"), str):
        return openai_api.error(400, "invalid_request_error", "Missing required parameter: 'model'.", param="model")
    refused = item_problem(body, secret=secret)
    if refused is not None:
        return refused
    if step is not None and step.unavailable:
        return openai_api.error(503, "server_error", _UNAVAILABLE)
    raw = body.get("input")
    items = (
        [{"role": "user", "content": raw}] if isinstance(raw, str) else [i for i in raw or () if isinstance(i, Mapping)]
    )
    users = [_input_text(i) for i in items if i.get("role") == "user"]
    if step is not None and step.user_messages is not None:
        users = list(step.user_messages)
    summary = step.content if step is not None and step.content is not None else _summary_of(items)
    output: list[dict[str, Any]] = [
        {
            "id": f"msg_wire_{n:04d}_{k}",
            "type": "message",
            "role": "user",
            "status": "completed",
            "content": [{"type": "input_text", "text": text}],
        }
        for k, text in enumerate(users)
    ]
    output.append(
        {"id": f"cmp_wire_{n:04d}", "type": "compaction", "encrypted_content": openai_api.seal(secret, summary)}
    )
    tokens = max(1, len(msgspec.json.encode(body)) // 4)
    usage = {
        "input_tokens": tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": max(1, len(summary) // 4),
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": tokens + max(1, len(summary) // 4),
    }
    response = {
        "id": f"resp_cmp_wire_{n:04d}",
        "object": "response.compaction",
        "created_at": int(t),
        "output": output,
        "usage": usage,
    }
    return json_response(200, response)


def _input_text(item: Mapping[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else ()
    return "".join(str(p.get("text", "")) for p in parts if isinstance(p, Mapping))

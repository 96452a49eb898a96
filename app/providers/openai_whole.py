"""A whole chat completion where a stream was asked for: some servers and proxies answer a
streamed request with one JSON body (a server that cannot stream with tools, a proxy that
buffers). It is read as one chunk holding everything, so it takes the streamed path from there."""

from __future__ import annotations

import json
from typing import Any

from app.providers import event_fields as fields
from app.providers.base import malformed_failure
from app.providers.failure import AttemptFailedError, Failure, server_message


def is_whole(response: Any) -> bool:
    return str(response.headers.get("content-type", "")).lower().startswith("application/json")


def parsed(raw: bytes) -> Any:
    """The body's JSON; anything else (not JSON, nested past the parser) fails the attempt."""
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise AttemptFailedError(malformed_failure(f"the body is not JSON: {exc}")) from None
    except RecursionError:
        raise AttemptFailedError(malformed_failure("the body is nested too deep")) from None


def as_chunk(raw: bytes) -> dict[str, Any]:
    """The completion in `raw` as one streamed chunk: each choice's message as its delta, each
    tool call with its index. An error body (sent with status 200) fails the attempt."""
    body = fields.obj(parsed(raw), "the completion")
    if body.get("error") is not None or body.get("object") == "error":
        raise AttemptFailedError(Failure(status=None, message=server_message(body, "the server failed")))
    if not fields.items(body.get("choices"), "choices"):
        raise fields.malformed("the completion has no choices")
    choices = []
    for choice in fields.items(body.get("choices"), "choices"):
        choice = fields.obj(choice, "a choice")
        message = dict(fields.optional_obj(choice.get("message"), "a message") or {})
        if calls := fields.items(message.get("tool_calls"), "tool_calls"):
            # A message's calls are a list: its order is theirs, whatever `index` a server adds
            # (LiteLLM numbers them by the backend's content block).
            message["tool_calls"] = [{**fields.obj(c, "a call"), "index": n} for n, c in enumerate(calls)]
        finish_reason = choice.get("finish_reason")
        choices.append({"index": choice.get("index", 0), "delta": message, "finish_reason": finish_reason})
    return {"choices": choices, "usage": body.get("usage")}

"""A whole Anthropic message where a stream was asked for (a compatible server or proxy that
answers in one JSON body): told again as the stream events that would have carried it, so it
takes the streamed path from there (thinking signatures and server blocks kept as they are)."""

from __future__ import annotations

import json
from typing import Any

from app.providers import event_fields as fields
from app.providers.failure import AttemptFailedError, Failure, server_message
from app.providers.openai_whole import parsed


def as_events(raw: bytes) -> list[dict[str, Any]]:
    body = fields.obj(parsed(raw), "the message")
    if body.get("type") == "error" or body.get("error") is not None:
        raise AttemptFailedError(Failure(status=None, message=server_message(body, "the server failed")))
    if not isinstance(body.get("content"), list):
        raise fields.malformed("the message has no content list")
    usage = body.get("usage")
    out: list[dict[str, Any]] = [{"type": "message_start", "message": {"usage": usage}}]
    for index, block in enumerate(fields.items(body.get("content"), "the message's content")):
        out.extend(_block_events(index, fields.obj(block, "a content block")))
        out.append({"type": "content_block_stop", "index": index})
    out.append({"type": "message_delta", "delta": {"stop_reason": body.get("stop_reason")}, "usage": usage})
    out.append({"type": "message_stop"})
    return out


def _block_events(index: int, block: dict[str, Any]) -> list[dict[str, Any]]:
    kind = block.get("type")
    if kind == "text":
        opening = {k: v for k, v in block.items() if k != "text"} | {"text": ""}
        return [_start(index, opening), _delta(index, {"type": "text_delta", "text": block.get("text")})]
    if kind == "thinking":
        return [
            _start(index, {"type": "thinking", "thinking": ""}),
            _delta(index, {"type": "thinking_delta", "thinking": block.get("thinking")}),
            _delta(index, {"type": "signature_delta", "signature": block.get("signature")}),
        ]
    if kind in ("tool_use", "server_tool_use"):
        arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
        return [
            _start(index, {**block, "input": {}}),
            _delta(index, {"type": "input_json_delta", "partial_json": arguments}),
        ]
    return [_start(index, block)]  # whole at its start: redacted thinking, a server tool's result


def _start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}

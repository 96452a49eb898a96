"""MCP answers as tool output text: a call's content blocks, a resource's contents, a prompt's messages."""

from __future__ import annotations

import base64
import json
from typing import Any

import mcp_types as types


def call_output(result: types.CallToolResult) -> tuple[str, bool]:
    parts = [_block(b) for b in result.content]
    if not parts and result.structured_content is not None:
        parts = [json.dumps(result.structured_content, ensure_ascii=False)]
    return "\n".join(parts) or "(no output)", bool(result.is_error)


def resource_output(result: types.ReadResourceResult) -> str:
    parts = []
    for item in result.contents:
        if isinstance(item, types.TextResourceContents):
            parts.append(item.text)
        elif isinstance(item, types.BlobResourceContents):
            size = len(base64.b64decode(item.blob, validate=False))
            parts.append(
                f"[base64 {item.mime_type or 'application/octet-stream'}, {size} bytes]\n{item.blob}"
            )
    return "\n\n".join(parts) or "(empty resource)"


def prompt_output(result: types.GetPromptResult) -> str:
    return "\n\n".join(f"[{m.role}]: {_block(m.content)}" for m in result.messages) or "(empty prompt)"


def _block(block: Any) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent | types.AudioContent):
        size = len(base64.b64decode(block.data, validate=False))
        return f"[{type(block).__name__.removesuffix('Content').lower()}: {block.mime_type}, {size} bytes]"
    if isinstance(block, types.EmbeddedResource):
        inner = block.resource
        if isinstance(inner, types.TextResourceContents):
            return f"[resource {inner.uri}]\n{inner.text}"
        return f"[resource {inner.uri}: base64 {inner.mime_type or 'binary'}]\n{inner.blob}"
    if isinstance(block, types.ResourceLink):
        return f"[resource link {block.uri}] {block.name}"
    return json.dumps(getattr(block, "model_dump", lambda **_: str(block))(mode="json"), ensure_ascii=False)

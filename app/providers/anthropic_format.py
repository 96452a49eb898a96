"""Neutral (OpenAI chat format) messages and tools turned into the Anthropic
Messages wire format: the `system` text, the `messages` list and the `tools`."""

from __future__ import annotations

import json
from typing import Any

from app.providers.content import split, text_of

# Anthropic needs `tool_use.input` to be an object. Arguments that are not a
# JSON object are kept, under this key, so the model still sees what it sent.
RAW_ARGUMENTS_KEY = "raw_arguments"


def system_text(messages: list[dict]) -> str:
    return "\n\n".join(text_of(m.get("content")) for m in messages if m["role"] == "system")


def convert_messages(messages: list[dict], *, supports_vision: bool) -> list[dict]:
    """User/assistant turns with content blocks; consecutive same-role turns merged.

    Tool results become `tool_result` blocks of a user turn, so a batch of
    results (and any user text after them) lands in one user message. Images
    go inside their `tool_result`, when the model can see them.
    """
    turns: list[dict] = []
    for message in messages:
        if message["role"] == "system":
            continue
        role = "assistant" if message["role"] == "assistant" else "user"
        blocks = _blocks(message, supports_vision)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return turns


def convert_tools(tools: list[dict]) -> list[dict]:
    converted = []
    for tool in tools:
        function = tool["function"]
        converted.append(
            {
                "name": function["name"],
                "description": function.get("description", ""),
                "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
            }
        )
    return converted


def tool_input(arguments: str | None) -> dict[str, Any]:
    """`tool_use.input` for an assistant call's argument text (see RAW_ARGUMENTS_KEY)."""
    if not arguments or not arguments.strip():
        return {}
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return {RAW_ARGUMENTS_KEY: arguments}
    return parsed if isinstance(parsed, dict) else {RAW_ARGUMENTS_KEY: arguments}


def _blocks(message: dict, supports_vision: bool) -> list[dict]:
    if message["role"] == "tool":
        return [
            {
                "type": "tool_result",
                "tool_use_id": message["tool_call_id"],
                "content": _result_content(message.get("content"), supports_vision),
            }
        ]
    blocks: list[dict] = []
    text = text_of(message.get("content"))
    if text:  # the API rejects empty text blocks
        blocks.append({"type": "text", "text": text})
    for call in message.get("tool_calls") or []:
        function = call["function"]
        blocks.append(
            {
                "type": "tool_use",
                "id": call["id"],
                "name": function["name"],
                "input": tool_input(function.get("arguments")),
            }
        )
    return blocks


def _result_content(content: Any, supports_vision: bool) -> str | list[dict]:
    text, images = split(content, supports_vision)
    if not images:
        return text
    blocks: list[dict] = [{"type": "text", "text": text}] if text else []  # no empty text blocks
    for image in images:
        source = {"type": "base64", "media_type": image["media_type"], "data": image["data"]}
        blocks.append({"type": "image", "source": source})
    return blocks

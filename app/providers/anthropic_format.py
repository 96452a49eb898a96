"""Neutral (OpenAI chat format) messages and tools turned into the Anthropic
Messages wire format: the `system` text, the `messages` list and the `tools`."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from app.providers.citations import split_tools
from app.providers.content import (
    SERVER_BLOCKS,
    Shared,
    SharedMessage,
    shared_with_json,
    split,
    text_of,
)

# Anthropic's server-side BM25 tool search; offered whenever some tool is `defer_loading`.
TOOL_SEARCH_TOOL = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
TOOL_SEARCH_BETA = "advanced-tool-use-2025-11-20"
# Anthropic's server-side web search; offered in our web_search's place to a model that has it.
WEB_SEARCH_TOOL = {"type": "web_search_20250305", "name": "web_search"}

# Anthropic needs `tool_use.input` to be an object. Arguments that are not a
# JSON object are kept, under this key, so the model still sees what it sent.
RAW_ARGUMENTS_KEY = "raw_arguments"


def system_text(messages: list[dict]) -> str:
    return "\n\n".join(text_of(m.get("content")) for m in messages if m["role"] == "system")


def convert_messages(
    messages: list[dict], *, supports_vision: bool, web_search: bool, supports_pdf: bool = False
) -> list[dict]:
    """User/assistant turns with content blocks; consecutive same-role turns merged.

    Tool results become `tool_result` blocks of a user turn, so a batch of
    results (and any user text after them) lands in one user message. Images
    go inside their `tool_result`, when the model can see them. Without
    `web_search` (the request does not offer that tool), earlier web searches
    are reduced to their text: the API refuses search blocks, and citations
    into them, that no offered tool explains (the model's capability was
    turned off).

    A SharedMessage's blocks are made once for each set of options and shared
    by every step that sends it; so is their JSON, from which each turn's is
    joined.
    """
    turns: list[tuple[str, list[_Converted]]] = []
    for message in messages:
        if message["role"] == "system":
            continue
        converted = _conversion(message, (supports_vision, supports_pdf), web_search)
        if converted is None:
            continue
        if turns and turns[-1][0] == converted.role:
            turns[-1][1].append(converted)
        else:
            turns.append((converted.role, [converted]))
    return [parts[0].turn if len(parts) == 1 else _merged(role, parts) for role, parts in turns]


class _Converted(NamedTuple):
    """A message's blocks, their JSON (comma-separated, as in a list), and the turn that it
    makes alone."""

    role: str
    blocks: tuple[Shared, ...]
    text: str
    turn: Shared


Sight = tuple[bool, bool]  # whether the model views images, and reads PDFs


def _conversion(message: dict, sight: Sight, web_search: bool) -> _Converted | None:
    if isinstance(message, SharedMessage):
        return message.derived(("anthropic", sight, web_search), lambda m: _convert(m, sight, web_search))
    return _convert(message, sight, web_search)


def _convert(message: dict, sight: Sight, web_search: bool) -> _Converted | None:
    blocks = _blocks(message, sight)
    if not web_search:
        blocks = [_plain(b) for b in blocks if not _is_web_search_block(b)]
    if not blocks:
        return None
    role = "assistant" if message["role"] == "assistant" else "user"
    shared = tuple(Shared(b) for b in blocks)
    text = ",".join(b.json_text() for b in shared)
    return _Converted(role, shared, text, _turn(role, list(shared), text))


def _merged(role: str, parts: list[_Converted]) -> Shared:
    return _turn(role, [b for part in parts for b in part.blocks], ",".join(part.text for part in parts))


def _turn(role: str, blocks: list[Shared], text: str) -> Shared:
    return shared_with_json({"role": role, "content": blocks}, f'{{"role":"{role}","content":[{text}]}}')


def convert_tools(tools: list[dict]) -> list[dict]:
    """Anthropic tool definitions; deferred ones keep `defer_loading`, and bring the
    server's tool search tool with them; the native search entry becomes its web search tool."""
    functions, native_search = split_tools(tools)
    converted: list[dict[str, Any]] = []
    for tool in functions:
        function = tool["function"]
        entry = {
            "name": function["name"],
            "description": function.get("description", ""),
            "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
        }
        if tool.get("defer_loading"):
            entry["defer_loading"] = True
        converted.append(entry)
    if any(t.get("defer_loading") for t in converted):
        converted.append(dict(TOOL_SEARCH_TOOL))
    if native_search is not None:
        converted.append({**WEB_SEARCH_TOOL, "max_uses": native_search["max_uses"]})
    return converted


def has_web_search(tools: list[dict]) -> bool:
    return any(t.get("type") == WEB_SEARCH_TOOL["type"] for t in tools)


def _is_web_search_block(block: dict) -> bool:
    if block.get("type") == "server_tool_use":
        return block.get("name") == WEB_SEARCH_TOOL["name"]
    return block.get("type") == "web_search_tool_result"


def _plain(block: dict) -> dict:
    if block.get("type") != "text" or "citations" not in block:
        return block
    return {k: v for k, v in block.items() if k != "citations"}


def has_tool_search(tools: list[dict]) -> bool:
    return any(t.get("type") == TOOL_SEARCH_TOOL["type"] for t in tools)


def tool_input(arguments: str | None) -> dict[str, Any]:
    """`tool_use.input` for an assistant call's argument text (see RAW_ARGUMENTS_KEY)."""
    if not arguments or not arguments.strip():
        return {}
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return {RAW_ARGUMENTS_KEY: arguments}
    return parsed if isinstance(parsed, dict) else {RAW_ARGUMENTS_KEY: arguments}


def _blocks(message: dict, sight: Sight) -> list[dict]:
    if message["role"] == "tool":
        return [
            {
                "type": "tool_result",
                "tool_use_id": message["tool_call_id"],
                "content": _result_content(message.get("content"), (sight[0], False)),
            }
        ]
    # What the server ran itself (its tool search and the references it returned) goes
    # back as it came, ahead of the text and the calls that followed from it. A reply
    # that could search the web kept its text blocks there too, in order, with their
    # citations: then they are the text, and the stored content (which ends with the
    # cited sources as links, for people) is not sent again.
    if message["role"] == "user" and isinstance(message.get("content"), list):  # with attachments
        content = _result_content(message["content"], sight)
        return (
            content if isinstance(content, list) else [{"type": "text", "text": content}] if content else []
        )
    blocks = _answered(message.get(SERVER_BLOCKS) or [])
    text = "" if any(b.get("type") == "text" for b in blocks) else text_of(message.get("content"))
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


def _answered(server_blocks: list[dict]) -> list[dict]:
    """The stored server blocks, less any server call whose result never came (a reply cut off
    by a cancel between the two): the API refuses a `server_tool_use` left without one."""
    answered = {b.get("tool_use_id") for b in server_blocks if b.get("type") != "server_tool_use"}
    return [dict(b) for b in server_blocks if b.get("type") != "server_tool_use" or b.get("id") in answered]


def _result_content(content: Any, sight: Sight) -> str | list[dict]:
    text, media = split(content, *sight)
    if not media:
        return text
    blocks: list[dict] = [{"type": "text", "text": text}] if text else []  # no empty text blocks
    for part in media:
        source = {"type": "base64", "media_type": part["media_type"], "data": part["data"]}
        if part["type"] == "document":  # an attached PDF, for a model that reads them
            blocks.append(
                {"type": "document", "source": source, "title": part.get("filename") or "document.pdf"}
            )
        else:
            blocks.append({"type": "image", "source": source})
    return blocks


def referenced_tools(blocks: list[dict]) -> list[str]:
    """The tool names a reply's tool search results reference (the tools it loaded)."""
    names = []
    for block in blocks:
        content = block.get("content") if block.get("type") == "tool_search_tool_result" else None
        references = content.get("tool_references") if isinstance(content, dict) else None
        for ref in references if isinstance(references, list) else []:
            if isinstance(ref, dict) and isinstance(ref.get("tool_name"), str):
                names.append(ref["tool_name"])
    return names

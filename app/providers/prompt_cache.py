"""Prompt caching: what marks a request's stable prefix for the provider's cache.

Anthropic caches a prefix up to a block marked `cache_control` (at most four marks a request):
the tools, the system prompt and the newest message are marked, so each step reads from the
cache what the step before it wrote. OpenAI caches on its own; a `prompt_cache_key` (the
workstream's id) routes a workstream's requests to the same cache. docs/providers.md, "Prompt
caching"."""

from __future__ import annotations

from typing import Any

from app.providers.content import Shared

EPHEMERAL = {"type": "ephemeral"}
MAX_BREAKPOINTS = 4  # what the Messages API accepts in one request


def mark_anthropic(params: dict[str, Any]) -> dict[str, Any]:
    """`params` with breakpoints on the last tool we define, the system prompt and the newest message's
    last block (copies: the shared blocks a worker keeps between steps are never changed)."""
    marked = dict(params)
    tools = list(params.get("tools") or [])
    plain = [n for n, tool in enumerate(tools) if "input_schema" in tool and not tool.get("defer_loading")]
    if plain:  # a server tool (web search) or a deferred one is never marked: they come last
        tools[plain[-1]] = {**tools[plain[-1]], "cache_control": EPHEMERAL}
        marked["tools"] = tools
    if system := params.get("system"):
        marked["system"] = [{"type": "text", "text": system, "cache_control": EPHEMERAL}]
    if messages := params.get("messages"):
        marked["messages"] = [*messages[:-1], _marked_message(messages[-1])]
    return marked


def _marked_message(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not content:
        return message
    blocks = list(content)
    last = blocks[-1]
    if not isinstance(last, dict) or last.get("type") in ("thinking", "redacted_thinking"):
        return message  # the API refuses a mark on a thinking block
    blocks[-1] = Shared({**last, "cache_control": EPHEMERAL})
    return Shared({**{k: v for k, v in message.items() if k != "content"}, "content": blocks})


def breakpoints(params: dict[str, Any]) -> int:
    """How many blocks of a request are marked (a request with more is refused)."""
    found = 0

    def walk(value: Any) -> None:
        nonlocal found
        if isinstance(value, dict | Shared):
            found += "cache_control" in value
            for item in value.values():
                walk(item)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)

    walk({key: params.get(key) for key in ("tools", "system", "messages")})
    return found

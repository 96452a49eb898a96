"""The names a model sees for MCP tools and prompts: `mcp__{server}__{name}`, made to fit.

Providers accept 1-64 characters of `[A-Za-z0-9_-]`. A longer name, or one with other
characters, is cut and given a hash of the full name, so it is the same in every worker
and every run; the catalog keeps the map back to the server's own name."""

from __future__ import annotations

import hashlib
import re

MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_HASH_CHARS = 8


def full_name(server: str, name: str) -> str:
    return f"mcp__{server}__{name}"


def model_name(server: str, name: str) -> str:
    """`mcp__{server}__{name}` if a provider accepts it, else a deterministic shortening."""
    wanted = full_name(server, name)
    safe = _UNSAFE.sub("_", wanted)
    if safe == wanted and len(wanted) <= MAX_NAME:
        return wanted
    digest = hashlib.sha256(wanted.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_CHARS]
    return f"{safe[: MAX_NAME - _HASH_CHARS - 1]}_{digest}"

"""The MCP tools as the web tier sees them: it holds no servers, so it reads the tool names workers
publish (app.mcp.status). Enough to count a workstream's tools and to know whether tool search
defers them; nothing here ever runs a tool."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import redis

from app.mcp import status
from app.mcp.catalog import SOURCE_NAME, MCPToolDefinition, MCPToolSource
from app.mcp.states import CONNECTED
from app.tools.core.tool import Tool, ToolDefinition
from app.tools.core.toolset import Catalog

READ_EVERY_SECONDS = 1.0  # a page asking for one workstream after another reads Redis once


class NotInThisProcess:
    """The handler of a published tool: the web tier never runs MCP tools, a worker does."""

    def prepare(self, args: dict[str, Any], ctx: Any) -> Any:
        raise RuntimeError("MCP tools run on a worker, not in the web tier")

    execute = prepare


class PublishedToolSource:
    name = SOURCE_NAME

    def __init__(self, client: redis.Redis, builtins: Mapping[str, ToolDefinition] | None = None) -> None:
        """`builtins`: read_resource's and use_prompt's definitions, offered while a connected
        server has resources / prompts, as a worker offers them."""
        self.redis = client
        self.builtins = dict(builtins or {})
        self._lock = threading.Lock()
        self._read_at = float("-inf")
        self._catalog = Catalog("empty")

    def catalog(self) -> Catalog:
        with self._lock:
            if time.monotonic() - self._read_at >= READ_EVERY_SECONDS:
                try:
                    self._catalog = self._build(status.read(self.redis))
                except redis.RedisError:  # counts without MCP for now; read again next time
                    self._catalog = Catalog("empty")
                self._read_at = time.monotonic()
            return self._catalog

    def catalog_at(self, version: str) -> Catalog | None:
        return None  # batches run on workers, against their own catalogs

    def _build(self, merged: dict[str, Any]) -> Catalog:
        live = [s for s in merged["servers"] if s["state"] == CONNECTED]
        handler = NotInThisProcess()
        names = {n: s["name"] for s in live for n in s["tools"]}
        extras = [n for n in self._extras(live) if n in self.builtins]
        tools = [Tool(self.builtins[n], handler, SOURCE_NAME) for n in extras]
        tools += [
            Tool(MCPToolDefinition(n, f"[MCP: {server}]", {"type": "object"}), handler, SOURCE_NAME)
            for n, server in names.items()
        ]
        newest = max(merged["workers"].values(), key=lambda w: w["ts"], default={"catalog_version": "empty"})
        return Catalog(newest["catalog_version"], tuple(tools))

    @staticmethod
    def _extras(live: list[dict[str, Any]]) -> list[str]:
        extras = []
        if any(s["resources"] or s["templates"] for s in live):
            extras.append("read_resource")
        if any(s["prompts"] for s in live):
            extras.append("use_prompt")
        return extras


class ProcessToolSource:
    """The MCP source of this process: a worker's live catalog once it has started its servers,
    the published one before that (in the web tier, which never starts them)."""

    name = SOURCE_NAME

    def __init__(self, live: MCPToolSource, published: PublishedToolSource, is_live: Callable[[], bool]):
        self.live = live
        self.published = published
        self.is_live = is_live

    def catalog(self) -> Catalog:
        return (self.live if self.is_live() else self.published).catalog()

    def catalog_at(self, version: str) -> Catalog | None:
        return self.live.catalog_at(version)

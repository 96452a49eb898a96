"""Loading the configured tool sources (`[tool_sources.NAME]` in config.toml) at start-up."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from app.tools.core.toolset import ToolSource
from app.tools.tool_search import SOURCE as TOOL_SEARCH_SOURCE


class ToolSourceError(Exception):
    """A configured tool source cannot be loaded; the message names it."""


def load_sources(config: Mapping[str, Mapping[str, Any]]) -> list[ToolSource]:
    """One source per entry: `factory(name, options)` where options are the entry's other keys."""
    sources = []
    for name, entry in config.items():
        if name == TOOL_SEARCH_SOURCE:
            raise ToolSourceError(f"[tool_sources.{name}]: the name is taken by tool search; choose another")
        module_name, _, attr = str(entry["factory"]).partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ToolSourceError(f"[tool_sources.{name}]: cannot load {entry['factory']}: {exc}") from exc
        options = {k: v for k, v in entry.items() if k != "factory"}
        source = factory(name, options)
        if getattr(source, "name", None) != name:
            raise ToolSourceError(f"[tool_sources.{name}]: the factory's source must be named {name!r}")
        sources.append(source)
    return sources

"""Whether a workstream's tools are searched rather than all listed, and how.

The `[tools]` search keys, the workstream's own `tool_search` override and its
model's capabilities decide a `SearchPlan`. Its tier says who searches: Anthropic
or OpenAI themselves (`defer_loading` on the deferred tools), or we do, through
the synthetic `tool_search` tool (BM25 in `app.bm25`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.settings import ModelSettings, SettingsError, ToolSettings, check_tool_search
from app.tools.core.tool import TASK

CLIENT = "client"  # our tool_search tool over BM25
ANTHROPIC = "anthropic"  # defer_loading + Anthropic's server-side BM25 tool search tool
OPENAI = "openai"  # defer_loading; OpenAI's hosted tool search
NATIVE_TIERS = frozenset({ANTHROPIC, OPENAI})
CAPABILITY = "supports_tool_search"  # [models.NAME.capabilities] flag: the provider searches
OVERRIDE_KEYS = ("mode", "threshold", "max_results")


class SearchOverrideError(ValueError):
    """A workstream's `tool_search` object is unusable; the message names the key."""


@dataclass(frozen=True)
class SearchPlan:
    mode: str
    threshold: int
    max_results: int
    tier: str = CLIENT

    def is_active(self, kind: str, tool_count: int) -> bool:
        """Search instead of listing: never for a task sub-agent (its tool set is fixed)."""
        if kind == TASK or self.mode == "off":
            return False
        return self.mode == "on" or tool_count > self.threshold

    @property
    def is_native(self) -> bool:
        return self.tier in NATIVE_TIERS


def plan(
    settings: ToolSettings, override: Mapping[str, Any] | None, model: ModelSettings | None
) -> SearchPlan:
    """The `[tools]` values with the workstream's override on top, and the model's tier."""
    given = dict(override or {})
    return SearchPlan(
        mode=given.get("mode", settings.search),
        threshold=given.get("threshold", settings.search_threshold),
        max_results=given.get("max_results", settings.search_max_results),
        tier=tier(model),
    )


def tier(model: ModelSettings | None) -> str:
    if model is None or not model.capabilities.get(CAPABILITY):
        return CLIENT
    return ANTHROPIC if model.provider == "anthropic" else OPENAI


def check_override(value: Any) -> dict[str, Any] | None:
    """A workstream's `tool_search` object as given at creation, checked; None for none."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise SearchOverrideError("tool_search must be an object with mode, threshold and/or max_results")
    unknown = [k for k in value if k not in OVERRIDE_KEYS]
    if unknown:
        shown = ascii(unknown[0])[:40]
        raise SearchOverrideError(f"tool_search: unknown key {shown}; it takes {', '.join(OVERRIDE_KEYS)}")
    defaults = ToolSettings()
    keys = ("tool_search.mode", "tool_search.threshold", "tool_search.max_results")
    try:
        check_tool_search(
            value.get("mode", defaults.search),
            value.get("threshold", defaults.search_threshold),
            value.get("max_results", defaults.search_max_results),
            keys,
        )
    except SettingsError as exc:
        raise SearchOverrideError(str(exc)) from None
    return dict(value)

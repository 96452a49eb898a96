"""Provider-native web search: a model whose capabilities say `supports_web_search` searches
itself (Anthropic's server-side web_search tool, OpenAI's search models), and our web_search
tool leaves its tool list. A neutral entry (`app.providers.citations.NATIVE_SEARCH`) stands in
for it until a provider's wire format turns it into its own form.
"""

from __future__ import annotations

from typing import Any

from app.providers.citations import NATIVE_SEARCH
from app.settings import (
    DEFAULT_WEB_SEARCH_MAX_USES,
    WEB_SEARCH_CAPABILITY,
    WEB_SEARCH_MAX_USES_KEY,
    ModelSettings,
)

TOOL = "web_search"


def is_native(model: ModelSettings | None) -> bool:
    return model is not None and model.is_chat_model and bool(model.capabilities.get(WEB_SEARCH_CAPABILITY))


def marker(model: ModelSettings) -> dict[str, Any]:
    uses = model.capabilities.get(WEB_SEARCH_MAX_USES_KEY, DEFAULT_WEB_SEARCH_MAX_USES)
    return {"type": NATIVE_SEARCH, "max_uses": uses}


def swap(
    schemas: list[dict[str, Any]], model: ModelSettings | None, is_offered: bool
) -> list[dict[str, Any]]:
    """The step's tool list with our web_search replaced by the provider's own search, when the
    model searches natively and the workstream's kind may search the web at all. Native search
    needs no backend, so it is offered even where our tool is not (no SearxNG configured)."""
    if not is_offered or not is_native(model):
        return schemas
    assert model is not None
    kept = [s for s in schemas if s.get("function", {}).get("name") != TOOL]
    return [*kept, marker(model)]

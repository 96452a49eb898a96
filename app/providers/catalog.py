"""The models a person may choose from (`GET /v1/api/models`): the configured `[models.NAME]`
tables and what each can do, read through `listing()` alone, so that another source (a model
registry) can replace the configuration without its callers changing.

What it says is safe to show any signed-in user: names, model ids, the provider and its server
family, capabilities. Never a key, and never a base URL (one may carry credentials or name a
private host); the family says what kind of server it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.providers.health import Health
from app.providers.profiles import family_of
from app.settings import WEB_SEARCH_CAPABILITY, ModelSettings, Settings


def listing(settings: Settings, health: Mapping[str, Health] | None = None) -> dict[str, Any]:
    """Every configured model, chat models first then by name, with the default's name; each
    with its `health` (app/providers/health.py) where one is recorded."""
    default = settings.model()
    models = sorted(settings.models.values(), key=lambda m: (not m.is_chat_model, m.name))
    found = health or {}
    return {
        "models": [
            {
                **_described(settings, m, is_default=m is default),
                "health": found[m.name].as_dict() if m.name in found else None,
            }
            for m in models
        ],
        "default": default.name if default is not None else settings.default_model,
    }


def _described(settings: Settings, model: ModelSettings, is_default: bool) -> dict[str, Any]:
    caps = model.capabilities
    chat = model.is_chat_model
    return {
        "name": model.name,
        "model": model.model,
        "provider": model.provider,
        "provider_family": family_of(model) if chat else None,
        "chat": chat,
        "vision": chat and model.supports_vision,
        "tools": chat,  # every chat model is offered its workstream's tools
        # a thinking budget asks for it; `supports_reasoning` says a model does it unasked
        "reasoning": chat
        and (model.thinking_budget_tokens is not None or bool(caps.get("supports_reasoning"))),
        "web_search": chat and bool(caps.get(WEB_SEARCH_CAPABILITY)),
        # the configured window only: asking the model's server would make this read slow
        "context_window": settings.compaction.rules(model.name).context_window if chat else None,
        "default": is_default,
        "pdf": chat and model.supports_pdf,
    }

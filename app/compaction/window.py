"""A model's context window from its server, where the configuration gives none: an
OpenAI-compatible server's `GET /models` says it for the model it serves (vLLM `max_model_len`,
llama.cpp `meta.n_ctx_train`, LM Studio and OpenRouter `context_length`). Asked once per process
and model; a server that does not say (or does not answer) is asked again after a while."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from typing import Any

from app.compaction.settings import CompactionSettings, Rules
from app.settings import ModelSettings

log = logging.getLogger(__name__)

ASK_TIMEOUT_SECONDS = 3.0
ASK_AGAIN_SECONDS = 300.0  # after no answer, or an answer without a window
MAX_WINDOW = 100_000_000  # past this a number is no window

_known: dict[tuple[str, str], tuple[int | None, float]] = {}  # (base_url, model) -> (window, when)
_lock = threading.Lock()


def of(model: ModelSettings) -> int | None:
    """The window the model's server reports, or None (not an OpenAI-compatible server of our
    own, no answer, or no window said)."""
    if model.provider != "openai" or not model.base_url:
        return None  # hosted OpenAI and Anthropic list no window
    key = (model.base_url, model.model)
    with _lock:
        found = _known.get(key)
    if found is not None and (found[0] is not None or time.monotonic() - found[1] < ASK_AGAIN_SECONDS):
        return found[0]
    window = _ask(model)
    with _lock:
        _known[key] = (window, time.monotonic())
    return window


def _ask(model: ModelSettings) -> int | None:
    import httpx  # on first use: a worker that never asks does not load it (test_lean_processes)

    headers = {"Authorization": f"Bearer {model.api_key}"} if model.api_key else {}
    url = (model.base_url or "").rstrip("/") + "/models"
    try:
        response = httpx.get(url, headers=headers, timeout=ASK_TIMEOUT_SECONDS)
        listed = response.json().get("data", []) if response.status_code == 200 else []
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        log.info("context window of %s: %s did not say (%s)", model.name, url, type(exc).__name__)
        return None
    for entry in listed if isinstance(listed, list) else []:
        if isinstance(entry, dict) and entry.get("id") == model.model:
            return window_in(entry)
    return None


def window_in(entry: dict[str, Any]) -> int | None:
    """The context length one `/models` entry gives, in any of the servers' spellings."""
    meta = entry.get("meta")
    meta = meta if isinstance(meta, dict) else {}
    for value in (entry.get("max_model_len"), entry.get("context_length"), meta.get("n_ctx_train")):
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_WINDOW:
            return value
    return None


def rules_for(settings: CompactionSettings, model: ModelSettings) -> Rules:
    """The model's compaction rules, its window asked of its server when none is configured."""
    rules = settings.rules(model.name)
    if rules.enabled and rules.context_window is None and (window := of(model)) is not None:
        return replace(rules, context_window=window)
    return rules

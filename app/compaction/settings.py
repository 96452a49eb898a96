"""The `[compaction]` section of config.toml (and `[roles] compactor`): when a conversation is
compacted and what stays whole. Parsed here and loaded by app.settings; docs/compaction.md
describes every key."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

DEFAULT_RESERVE = 8192  # tokens kept free below the window for the answer and the step's growth
DEFAULT_KEEP_LAST = 6  # the newest messages, never summarised
MAX_KEEP_LAST = 1000
MAX_TOKENS_SETTING = 100_000_000  # no window, reserve or budget is larger than this
KEYS = ("enabled", "context_window", "reserve", "keep_last")


class CompactionSettingsError(ValueError):
    """A `[compaction]` key with a value the service cannot use."""


@dataclass(frozen=True)
class Rules:
    """What compacts one model's conversations."""

    enabled: bool = True
    context_window: int | None = None  # tokens; None: only a provider's "too long" error compacts
    reserve: int = DEFAULT_RESERVE
    keep_last: int = DEFAULT_KEEP_LAST

    @property
    def threshold(self) -> int | None:
        """The estimated request size past which a step compacts first (None: never ahead)."""
        if self.context_window is None:
            return None
        return max(1, self.context_window - self.reserve)


@dataclass(frozen=True)
class CompactionSettings:
    default: Rules = field(default_factory=Rules)
    models: Mapping[str, Rules] = field(default_factory=dict)  # `[compaction.models.NAME]`
    compactor: str | None = None  # `[roles] compactor`: the model that writes summaries

    def rules(self, model: str) -> Rules:
        return self.models.get(model, self.default)


def from_config(config: Mapping[str, Any], chat_models: set[str]) -> CompactionSettings:
    """`[compaction]`, `[compaction.models.NAME]` (each over `[compaction]`), a model's own
    `[models.NAME] context_window`, and `[roles] compactor`."""
    section = config.get("compaction", {})
    if not isinstance(section, Mapping):
        raise CompactionSettingsError("[compaction] must be a table")
    per_model = section.get("models", {})
    if not isinstance(per_model, Mapping):
        raise CompactionSettingsError("[compaction.models] must be a table of [compaction.models.NAME]")
    default = _rules(Rules(), {k: v for k, v in section.items() if k != "models"}, "[compaction]")
    models: dict[str, Rules] = {}
    for name, entry in (config.get("models") or {}).items():
        own = entry.get("context_window") if isinstance(entry, Mapping) else None
        if own is not None:
            models[name] = _rules(default, {"context_window": own}, f"[models.{name}]")
    for name, entry in per_model.items():
        if not isinstance(entry, Mapping):
            raise CompactionSettingsError(f"[compaction.models.{name}] must be a table")
        models[name] = _rules(models.get(name, default), entry, f"[compaction.models.{name}]")
    return CompactionSettings(default, models, _compactor(config.get("roles", {}), chat_models))


def _rules(base: Rules, entry: Mapping[str, Any], where: str) -> Rules:
    unknown = set(entry) - set(KEYS)
    if unknown:
        raise CompactionSettingsError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    if "enabled" in entry and not isinstance(entry["enabled"], bool):
        raise CompactionSettingsError(f"{where} enabled must be true or false")
    changes: dict[str, Any] = {k: entry[k] for k in ("enabled",) if k in entry}
    for key, low, high in (
        ("context_window", 1, MAX_TOKENS_SETTING),
        ("reserve", 0, MAX_TOKENS_SETTING),
        ("keep_last", 0, MAX_KEEP_LAST),
    ):
        if key in entry:
            changes[key] = _whole(entry[key], low, high, f"{where} {key}")
    return replace(base, **changes)


def _whole(value: Any, low: int, high: int, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise CompactionSettingsError(f"{key} must be a whole number from {low} to {high}, not {value!r}")
    return value


def _compactor(roles: Any, chat_models: set[str]) -> str | None:
    name = roles.get("compactor") if isinstance(roles, Mapping) else None
    if name is None:
        return None
    if not isinstance(name, str) or name not in chat_models:
        known = ", ".join(sorted(chat_models)) or "none"
        raise CompactionSettingsError(f"[roles] compactor = {name!r} is not a configured chat model: {known}")
    return name

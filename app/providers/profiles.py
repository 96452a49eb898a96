"""Model server families: which one a model's server is (`[models.NAME] provider_family`, else
guessed from its base URL) and what that changes in the requests we send it. What servers send
back is read the same whatever the family (docs/providers.md has the table)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from app.settings import ModelSettings

# Hosts of the hosted APIs, and Ollama's well-known port (its docs' `localhost:11434/v1`).
KNOWN_HOSTS = {
    "api.openai.com": "openai",
    "api.anthropic.com": "anthropic",
    "api.deepseek.com": "deepseek",
    "openrouter.ai": "openrouter",
}
OLLAMA_PORT = 11434


@dataclass(frozen=True)
class Profile:
    family: str
    # OpenAI's reasoning models refuse `max_tokens` (its API reference marks it deprecated for
    # `max_completion_tokens`); the other servers have long known `max_tokens`, not all the newer.
    max_tokens_key: str = "max_tokens"
    # Statuses this family's servers answer for a failure another try may not meet, beyond
    # those retried from any server (408, 409, 429, 5xx).
    retryable_statuses: frozenset[int] = frozenset()


PROFILES = {
    "openai": Profile("openai", max_tokens_key="max_completion_tokens"),
    # TGI answers a generation that failed in a shard (CUDA out of memory, a lost worker) 424
    # Failed Dependency (router/src/server.rs, InferError::GenerationError).
    "tgi": Profile("tgi", retryable_statuses=frozenset({424})),
}


def family_of(model: ModelSettings) -> str:
    """The configured family, else the one the base URL names, else the provider's own API
    (no base URL) or "generic"."""
    if model.provider_family:
        return model.provider_family
    if not model.base_url:
        return model.provider
    parts = urlsplit(model.base_url)
    host = (parts.hostname or "").lower()
    for known, family in KNOWN_HOSTS.items():
        if host == known or host.endswith("." + known):
            return family
    return "ollama" if parts.port == OLLAMA_PORT else "generic"


def profile_for(model: ModelSettings) -> Profile:
    family = family_of(model)
    return PROFILES.get(family, Profile(family))

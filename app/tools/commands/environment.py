"""The environment a tool's subprocess gets: the service's own, minus its secrets.

`scrubbed_environment` drops what looks secret before a command starts;
`redact` is the second line of defence, for secrets that reach output anyway.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING

from app.settings import DISCORD_BOT_TOKEN_ENV, SERVICE_JWT_SECRET_ENV

if TYPE_CHECKING:
    from app.tools.core.base import ToolContext

# Environment names whose values are the service's own secrets: never shown to
# a tool's subprocess, never logged.
SERVICE_SECRET_ENV = (
    "DATABASE_URL",
    "REDIS_URL",
    "TURNSTONE_API_TOKEN",
    "TURNSTONE_METRICS_TOKEN",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    SERVICE_JWT_SECRET_ENV,
    DISCORD_BOT_TOKEN_ENV,  # and its _NAME variants: bash's scrubbing removes any *_TOKEN anyway
)

SECRET_SUFFIXES = ("_KEY", "_SECRET", "_TOKEN", "_PASSWORD", "_CREDENTIAL", "_CREDENTIALS")
# The broker's URLs (DATABASE_URL and REDIS_URL are service secrets already),
# and libpq's password variable, which carries the database password when the
# URL leaves it out.
DATABASE_ENV = ("CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "PGPASSWORD")
MIN_SECRET_LENGTH = 8  # shorter values would redact ordinary words
REDACTED = "[redacted]"

# scheme://user:password@host: the password is what makes the URL a secret
_URL_PASSWORD = re.compile(r"[a-z][a-z0-9+.-]*://[^/@\s:]*:([^/@\s]+)@", re.IGNORECASE)


def is_secret(name: str, value: str, known: Collection[str] = ()) -> bool:
    """Whether a variable must not reach a subprocess: by its name, by a password
    inside it, or because its value is a secret the service holds (a model's API
    key read from a variable of any name)."""
    upper = name.upper()
    return (
        upper.endswith(SECRET_SUFFIXES)
        or upper in SERVICE_SECRET_ENV
        or upper in DATABASE_ENV
        or _URL_PASSWORD.search(value) is not None
        or (bool(value) and value in known)
    )


def service_secrets(ctx: ToolContext) -> list[str]:
    """Secrets the service holds that no tool may pass on, whatever variable carries them (or none):
    the workstream's model's API key and the reranker's."""
    keys = [ctx.model.api_key if ctx.model is not None else None]
    keys.append(ctx.settings.reranker.api_key if ctx.settings.reranker is not None else None)
    return [key for key in keys if key]


def scrubbed_environment(environ: Mapping[str, str], known: Collection[str] = ()) -> dict[str, str]:
    return {name: value for name, value in environ.items() if not is_secret(name, value, known)}


def secret_values(environ: Mapping[str, str], known: Collection[str] = ()) -> list[str]:
    """The values worth redacting, longest first: the removed ones, the passwords
    inside URLs, and the `known` secrets even when no variable holds them."""
    values = {v for v in known if v}
    for name, value in environ.items():
        if not is_secret(name, value, known):
            continue
        values.add(value)
        values.update(match.group(1) for match in _URL_PASSWORD.finditer(value))
    return sorted((v for v in values if len(v) >= MIN_SECRET_LENGTH), key=len, reverse=True)


def redact(text: str, values: Iterable[str]) -> str:
    # Longest first, so a secret containing another is replaced whole.
    for value in sorted(values, key=len, reverse=True):
        if value and value in text:
            text = text.replace(value, REDACTED)
    return text

"""The environment a tool's subprocess gets: the service's own, minus its secrets.

`scrubbed_environment` drops what looks secret before a command starts;
`redact` is the second line of defence, for secrets that reach output anyway.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from app.settings import SERVICE_SECRET_ENV

SECRET_SUFFIXES = ("_KEY", "_SECRET", "_TOKEN", "_PASSWORD", "_CREDENTIAL", "_CREDENTIALS")
BROKER_ENV = ("CELERY_BROKER_URL", "CELERY_RESULT_BACKEND")
MIN_SECRET_LENGTH = 8  # shorter values would redact ordinary words
REDACTED = "[redacted]"

# scheme://user:password@host: the password is what makes the URL a secret
_URL_PASSWORD = re.compile(r"[a-z][a-z0-9+.-]*://[^/@\s:]*:([^/@\s]+)@", re.IGNORECASE)


def is_secret(name: str, value: str) -> bool:
    upper = name.upper()
    return (
        upper.endswith(SECRET_SUFFIXES)
        or upper in SERVICE_SECRET_ENV
        or upper in BROKER_ENV
        or _URL_PASSWORD.search(value) is not None
    )


def scrubbed_environment(environ: Mapping[str, str]) -> dict[str, str]:
    return {name: value for name, value in environ.items() if not is_secret(name, value)}


def secret_values(environ: Mapping[str, str]) -> list[str]:
    """The removed values worth redacting (and the passwords inside URLs), longest first."""
    values = set()
    for name, value in environ.items():
        if not is_secret(name, value):
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

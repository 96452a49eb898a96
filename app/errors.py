"""The service's exceptions, one base per audience.

ServiceError                 raised by app/ for a caller's request; the web layer maps it
├── BadRequestError          400: a field is missing, unknown, or not as the API document says
├── UnprocessableError       422: well-formed, but names what cannot be used (a skill not enabled)
├── NotFoundError            404: no such workstream
├── PayloadTooLargeError     413: a message over the documented size
├── ConflictError            409: e.g. a decision for a call that is not pending
├── UnauthorizedError        401: no valid token (unknown, expired, revoked, user disabled)
├── ForbiddenError           403: a missing scope, or a read-only thing (an MCP skill)
└── TooManyRequestsError     429: sign-in attempts slowed down
StaleAttemptError            a newer attempt of the same turn took over; the old one stops
"""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    status = 400

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class BadRequestError(ServiceError):
    status = 400


class UnprocessableError(ServiceError):
    """A request the API document allows, naming something the service cannot use: a skill that is
    not enabled, a directory that does not exist, a host the SSRF guard refuses. 400 is kept for
    requests the document itself forbids, so a client can tell its bug from a wrong value."""

    status = 422


def check_text(field: str, value: str, max_chars: int | None = None) -> None:
    """BadRequestError naming `field` when the string `value` holds what no stored text may (a
    NUL, a lone surrogate) or is over `max_chars` characters."""
    if "\x00" in value:
        raise BadRequestError(f"{field}: must not contain a NUL character", field=field)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        message = f"{field}: contains a lone surrogate (not valid Unicode)"
        raise BadRequestError(message, field=field) from None
    if max_chars is not None and len(value) > max_chars:
        raise BadRequestError(f"{field}: at most {max_chars} characters, got {len(value)}", field=field)


def unstorable(where: str, value: Any) -> str | None:
    """Why the JSON `value` cannot be stored as it is, naming the place (`where.key[2]`): a key or
    a string holding a NUL or a lone surrogate; None when every one can. The walk is as deep as
    the value (a request's nesting limit bounds it), and looks at the text itself, not at how
    JSON writes it: a backslash followed by `u0000` is ordinary text."""
    if isinstance(value, str):
        if "\x00" in value:
            return f"{where}: must not contain a NUL character"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"{where}: contains a lone surrogate (not valid Unicode)"
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            found = unstorable(where, key) if isinstance(key, str) else None
            found = found or unstorable(f"{where}.{key}", item)
            if found:
                return found
    elif isinstance(value, list):
        for n, item in enumerate(value):
            if found := unstorable(f"{where}[{n}]", item):
                return found
    return None


class NotFoundError(ServiceError):
    status = 404


class PayloadTooLargeError(ServiceError):
    status = 413


class ConflictError(ServiceError):
    status = 409


class StaleAttemptError(Exception):
    """This task's attempt was superseded (the sweeper re-queued it); its writes are refused."""


class UnauthorizedError(ServiceError):
    """401: no token, or one that is unknown, expired, revoked, or whose user is disabled."""

    status = 401


class ForbiddenError(ServiceError):
    """403: a valid token without the scope the request needs (the message names it), or a
    change to something that may not be changed so (a read-only skill)."""

    status = 403


class TooManyRequestsError(ServiceError):
    """429: sign-in attempts slowed down; `retry_after` says for how long."""

    status = 429

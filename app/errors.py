"""The service's exceptions, one base per audience.

ServiceError                 raised by app/ for a caller's request; the web layer maps it
├── BadRequestError          400: a body field is missing or of the wrong type (names it)
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

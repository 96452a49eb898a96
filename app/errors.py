"""The service's exceptions, one base per audience.

ServiceError                 raised by app/ for a caller's request; the web layer maps it
├── BadRequestError          400: a body field is missing or of the wrong type (names it)
├── NotFoundError            404: no such workstream
├── PayloadTooLargeError     413: a message over the documented size
├── ConflictError            409: e.g. a decision for a call that is not pending
└── ForbiddenError           403: e.g. editing a read-only (MCP) skill
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


class NotFoundError(ServiceError):
    status = 404


class PayloadTooLargeError(ServiceError):
    status = 413


class ConflictError(ServiceError):
    status = 409


class StaleAttemptError(Exception):
    """This task's attempt was superseded (the sweeper re-queued it); its writes are refused."""


class ForbiddenError(ServiceError):
    """403: the thing exists but may not be changed this way (a read-only skill)."""

    status = 403

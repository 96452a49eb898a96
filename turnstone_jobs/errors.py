"""What the client raises, one base for everything it raises and one per kind of failure.

ClientError                    anything this package raises
├── ApiError                   the service answered with an error (`status`, `message`, `body`)
│   ├── InvalidRequestError    400/413/422: the request was refused as it stands (`field` names what)
│   ├── AuthError              401/403: no valid token, or one without the scope needed
│   ├── NotFoundError          404: no such workstream (or call, watch, server)
│   ├── ConflictError          409: e.g. a decision for a call that is no longer pending
│   └── ServerError            5xx, or an answer that is not the service's JSON
├── ConnectionError            the service cannot be reached (also a builtins.ConnectionError)
├── TimeoutError               a wait ran out (also a builtins.TimeoutError)
└── ApprovalNeededError        send_and_wait met a call needing a decision and had no callback
"""

from __future__ import annotations

import builtins
from typing import Any


class ClientError(Exception):
    """Base of everything turnstone_jobs raises."""


class ApiError(ClientError):
    """The service refused a request; `message` is its own words, `status` the HTTP code."""

    def __init__(self, message: str, status: int, body: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.body = body or {}

    @property
    def field(self) -> str | None:
        value = self.body.get("field")
        return value if isinstance(value, str) else None


class InvalidRequestError(ApiError):
    pass


class AuthError(ApiError):
    pass


class NotFoundError(ApiError):
    pass


class ConflictError(ApiError):
    pass


class ServerError(ApiError):
    pass


class ConnectionError(ClientError, builtins.ConnectionError):  # noqa: A001 - caught as either
    pass


class TimeoutError(ClientError, builtins.TimeoutError):  # noqa: A001
    pass


class ApprovalNeededError(ClientError):
    """A call waits for a decision and send_and_wait was given no `on_approval`; the turn stays
    parked (approve or deny it, or cancel the turn). `items` are the calls waiting."""

    def __init__(self, message: str, turn_id: str, items: list[Any]) -> None:
        super().__init__(message)
        self.turn_id = turn_id
        self.items = items


_BY_STATUS: dict[int, type[ApiError]] = {
    400: InvalidRequestError,
    401: AuthError,
    403: AuthError,
    404: NotFoundError,
    409: ConflictError,
    413: InvalidRequestError,
    422: InvalidRequestError,
}


def api_error(status: int, body: Any, fallback: str = "") -> ApiError:
    """The exception for an error answer: the service's own message, the class by its status."""
    data = body if isinstance(body, dict) else {}
    message = data.get("error") if isinstance(data.get("error"), str) else None
    if message is None:
        message = data.get("message") if isinstance(data.get("message"), str) else None
    if message is None:
        message = f"HTTP {status}" + (f": {fallback[:200]}" if fallback else "")
    kind = _BY_STATUS.get(status) or (ServerError if status >= 500 or status < 400 else ApiError)
    return kind(message, status, data)

"""What can go wrong when asking a model for a reply.

    ModelError                      base: catch this to handle any model failure
     +-- ModelNotConfiguredError    no API key and no local server: says what to set
     +-- ModelUnavailableError      connection refused, timeout, 429 or 5xx, or a
     |                              stream cut off mid-reply, and the retries spent
     +-- ModelRequestError          the server refused the request (a 4xx other than
          |                         408/409/429): retrying would not help
          +-- ContextWindowError    the conversation no longer fits the model's
                                    context window: says what to do

Messages are written for the person running the service and never contain an API key.
"""

from __future__ import annotations


class ModelError(Exception):
    """A model could not produce a reply."""


class ModelNotConfiguredError(ModelError):
    """The model has neither an API key nor a local server to talk to."""


class ModelUnavailableError(ModelError):
    """The model server could not be reached, or kept failing or cutting its stream short."""


class ModelRequestError(ModelError):
    """The model server rejected the request itself."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ContextWindowError(ModelRequestError):
    """The conversation is longer than the model's context window: every later request
    with it would fail the same way until it is shortened or a new one is started."""


def redact(text: str, secret: str | None) -> str:
    """`text` with every occurrence of `secret` masked (a server may echo the key back)."""
    if not secret:
        return text
    return text.replace(secret, "***")

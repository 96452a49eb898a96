"""What a request that failed unexpectedly is answered, over HTTP and over the websocket alike.

A passing fault (the database or Redis unreachable, a connection the server dropped: the faults
the engine also treats as passing, `recovery.is_transient`) is a 503 to retry, with
`Retry-After` over HTTP; anything else is our bug, a 500 that says little (the log has it).
"""

from __future__ import annotations

import logging
from typing import Any

from app.engine.running.recovery import is_transient

log = logging.getLogger(__name__)

# A pooled connection is replaced at once and a restart takes a few seconds: when to retry.
RETRY_AFTER_SECONDS = 2
UNREACHABLE = "the database or Redis cannot be reached just now; try again"


def answer(exc: BaseException) -> tuple[int, dict[str, Any]]:
    """The status and JSON body for `exc`, logged as what it is."""
    if is_transient(exc):
        log.warning("a request met a passing fault (%s): answered 503", type(exc).__name__)
        return 503, {"error": UNREACHABLE}
    log.error("unhandled error", exc_info=exc)
    return 500, {"error": "internal error"}
